"""The account area in a real browser: sessions across two browsers, unlinking, deleting,
signing out; then the same main flows with JavaScript off."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from webapp.extensions import db
from webapp.models import Account, User

from .conftest import demo_signin

pytestmark = pytest.mark.browser


def _link_account(live_server, email: str, provider: str = "op-jwt") -> None:
    """Give the user a second sign-in method (as linking through that provider would)."""
    with live_server.app.app_context():
        user = db.session.execute(db.select(User).where(User.email == email)).scalar_one()
        db.session.add(
            Account(
                user_id=user.id,
                type="oidc",
                provider=provider,
                provider_account_id=f"sub-{user.id}",
            )
        )
        db.session.commit()


def _user_exists(live_server, email: str) -> bool:
    with live_server.app.app_context():
        return db.session.execute(db.select(User.id).where(User.email == email)).first() is not None


def test_one_browser_signs_the_other_out(new_page, live_server):
    laptop, phone = (
        new_page(),
        new_page(
            viewport={"width": 375, "height": 800},
            user_agent="Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 "
            "like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
            "Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
        ),
    )
    demo_signin(laptop, "gus@example.com")
    demo_signin(phone, "gus@example.com")

    laptop.goto("/account")
    rows = laptop.locator("#sessions tbody tr")
    expect(rows).to_have_count(2)
    expect(laptop.locator("#sessions tr.current")).to_contain_text("this device")
    phone_row = rows.filter(has_text="Mobile Safari 17 on iPhone")
    expect(phone_row).to_contain_text("127.0.0.1")
    phone_row.get_by_role("button", name="Sign out").click()
    # htmx swapped the section in place: the message, one row left, still on /account.
    expect(laptop.locator("#sessions [role=status]")).to_have_text("That session was signed out.")
    expect(laptop.locator("#sessions [role=status]")).to_be_focused()
    expect(rows).to_have_count(1)

    phone.goto("/account")
    phone.wait_for_url("**/auth/signin?error=SessionRequired*")
    expect(phone.get_by_role("alert")).to_contain_text("Please sign in")

    # The phone signs in again; "sign out all other sessions" from the laptop ends it too.
    demo_signin(phone, "gus@example.com")
    laptop.reload()
    expect(rows).to_have_count(2)
    laptop.get_by_role("button", name="Sign out all other sessions").click()
    expect(laptop.locator("#sessions [role=status]")).to_have_text("Signed out 1 other session.")
    phone.goto("/account")
    phone.wait_for_url("**/auth/signin?error=SessionRequired*")


def test_unlink_refusal_unlink_and_delete(new_page, live_server):
    page = new_page()
    demo_signin(page, "hal@example.com")
    page.goto("/account")
    accounts = page.locator("#accounts")
    # E-mail sign-in is offered, so even the only account could go; a second makes it plain.
    _link_account(live_server, "hal@example.com")
    page.reload()
    linked = accounts.get_by_role("list", name="Linked sign-in methods").get_by_role("listitem")
    expect(linked).to_have_count(2)
    expect(accounts.get_by_role("button", name="Link Acme SSO")).to_be_visible()
    expect(accounts.get_by_role("button", name="Link Initech")).to_have_count(0)
    accounts.get_by_role("button", name="Remove Initech").click()
    expect(accounts.get_by_role("status")).to_have_text(
        "Initech was removed from your sign-in methods."
    )
    expect(accounts.get_by_role("button", name="Link Initech")).to_be_visible()

    delete = page.locator("#delete")
    field = delete.get_by_label("Type DELETE to confirm")
    field.fill("delete")
    delete.get_by_role("button", name="Delete my account").click()
    # The browser's own check (pattern) stops it; nothing was sent.
    assert field.evaluate("el => el.validity.patternMismatch")
    assert _user_exists(live_server, "hal@example.com")
    field.fill("DELETE")
    delete.get_by_role("button", name="Delete my account").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_role("status")).to_have_text(
        "Your account and everything linked to it were deleted."
    )
    expect(page.get_by_text("You are not signed in.")).to_be_visible()
    assert not _user_exists(live_server, "hal@example.com")


def test_sign_out_confirms_in_place(new_page, live_server):
    page = new_page()
    demo_signin(page, "ida@example.com")
    page.goto("/account")
    page.get_by_role("navigation").get_by_role("link", name="Sign out").click()
    slot = page.locator("#signout-slot")
    expect(slot.get_by_role("heading", name="Sign out")).to_be_focused()
    assert page.url.endswith("/account")
    slot.get_by_role("link", name="Cancel").click()
    expect(slot).to_be_empty()
    page.get_by_role("navigation").get_by_role("link", name="Sign out").click()
    slot.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_text("You are not signed in.")).to_be_visible()


def test_main_flows_without_javascript(new_page, live_server):
    page = new_page(java_script_enabled=False)
    other = new_page(java_script_enabled=False)
    page.goto("/auth/signin")
    # The server-rendered chooser: every provider, e-mail and credentials forms.
    expect(page.locator("#provider-chooser button[data-provider]")).to_have_count(6)
    expect(page.get_by_label("E-mail address")).to_be_visible()

    demo_signin(page, "jo@example.com", javascript=False)
    demo_signin(other, "jo@example.com", javascript=False)
    page.goto("/account")
    _link_account(live_server, "jo@example.com", "op-rsa")
    page.reload()
    page.locator("#accounts").get_by_role("button", name="Remove Umbrella").click()
    page.wait_for_url("**/account#accounts")
    expect(page.locator("#accounts [role=status]")).to_have_text(
        "Umbrella was removed from your sign-in methods."
    )
    page.get_by_role("button", name="Sign out all other sessions").click()
    page.wait_for_url("**/account#sessions")
    expect(page.locator("#sessions tbody tr")).to_have_count(1)
    other.goto("/account")
    other.wait_for_url("**/auth/signin?error=SessionRequired*")

    # Sign out through the confirmation page.
    page.get_by_role("navigation").get_by_role("link", name="Sign out").click()
    page.wait_for_url("**/auth/signout")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_text("You are not signed in.")).to_be_visible()

    # E-mail sign-in as a plain form: the "Check your email" page.
    page.goto("/auth/signin")
    page.get_by_label("E-mail address").fill("jo@example.com")
    page.get_by_role("button", name="Sign in with Email").click()
    page.wait_for_url("**/auth/verify-request*")
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()


def test_link_another_provider_through_the_openid_provider(new_page, live_server):
    page = new_page()
    # The OP's account "alice" (Hooli's login_hint) has this verified address.
    demo_signin(page, "alice@example.com")
    page.goto("/account")
    accounts = page.locator("#accounts")
    accounts.get_by_role("button", name="Link Hooli").click()
    page.wait_for_url(f"{live_server.url}/account")
    linked = accounts.get_by_role("list", name="Linked sign-in methods")
    expect(linked.get_by_role("button", name="Remove Hooli")).to_be_visible()
    expect(accounts.get_by_role("button", name="Link Hooli")).to_have_count(0)
