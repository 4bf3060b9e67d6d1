"""The account area in a real browser: sessions across two browsers, unlinking, deleting,
signing out; then the same main flows with JavaScript off."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import Account, AuthEvent, User

from ..support.browser import SCREENSHOTS, demo_signin

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
    expect(accounts.get_by_role("button", name="Remove Demo account")).to_have_count(0)
    _link_account(live_server, "hal@example.com")
    page.reload()
    # The demo address is not verified, so a link to it would sign in someone new: e-mail is
    # no way in here, and the only account could not go; a second one makes it removable.
    methods = accounts.get_by_role("list", name="Your sign-in methods").get_by_role("listitem")
    expect(methods).to_have_count(2)
    expect(accounts.get_by_role("button", name="Link Acme SSO")).to_be_visible()
    expect(accounts.get_by_role("button", name="Link Initech")).to_have_count(0)
    accounts.get_by_role("button", name="Remove Initech").click()
    # It asks first, in place (tests/browser/test_rough_edges.py has the rest of it).
    accounts.get_by_role("button", name="Yes, remove Initech").click()
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
    page.get_by_role("button", name="Yes, remove Umbrella").click()  # its own page asks first
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

    # E-mail sign-in as a plain form: the "Check your e-mail" page.
    page.goto("/auth/signin")
    page.get_by_label("E-mail address").fill("jo@example.com")
    page.get_by_role("button", name="Sign in with E-mail").click()
    page.wait_for_url("**/auth/verify-request*")
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()


def test_link_another_provider_through_the_openid_provider(new_page, live_server):
    page = new_page()
    # The OP's account "alice" (Hooli's login_hint) has this verified address.
    demo_signin(page, "alice@example.com")
    page.goto("/account")
    accounts = page.locator("#accounts")
    accounts.get_by_role("button", name="Link Hooli").click()
    page.wait_for_url(f"{live_server.url}/account")
    methods = accounts.get_by_role("list", name="Your sign-in methods")
    expect(methods.get_by_role("button", name="Remove Hooli")).to_be_visible()
    expect(accounts.get_by_role("button", name="Link Hooli")).to_have_count(0)


LONG_ADDRESS = "maximilian.alexander.featherstonehaugh@subdomain.example-company.co.uk"

#: The index in ``el``'s text of the first character of each line after the first.
LINE_STARTS = """el => {
  const starts = [];
  let top = null;
  let index = 0;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let k = 0; k < node.length; k++, index++) {
      const range = document.createRange();
      range.setStart(node, k);
      range.setEnd(node, k + 1);
      const box = range.getClientRects()[0];
      if (!box) continue;
      if (top !== null && box.top > top + 2) starts.push(index);
      if (top === null || box.top > top + 2) top = box.top;
    }
  }
  return starts;
}"""

#: How many lines of text an element's content box holds.
LINES = """el => {
  const style = getComputedStyle(el);
  const inner = el.getBoundingClientRect().height - parseFloat(style.paddingTop)
    - parseFloat(style.paddingBottom) - parseFloat(style.borderTopWidth)
    - parseFloat(style.borderBottomWidth);
  return inner / parseFloat(style.lineHeight);
}"""

#: The rows the header's items take: boxes whose heights overlap share a row.
HEADER_ROWS = """() => {
  const boxes = [...document.querySelectorAll(".site-header .brand, .site-header nav a")]
    .map((el) => el.getBoundingClientRect()).sort((a, b) => a.top - b.top);
  let rows = 0;
  let bottom = -Infinity;
  for (const box of boxes) {
    if (box.top >= bottom) rows++;
    bottom = Math.max(bottom, box.bottom);
  }
  return rows;
}"""


def test_show_more_activity_in_place_and_without_javascript(new_page, live_server):
    page = new_page()
    demo_signin(page, "ivy@example.com")  # three events: created, linked, signed in
    with live_server.app.app_context():
        user = db.session.execute(db.select(User.id).where(User.email == "ivy@example.com"))
        ivy = user.scalar_one()
        db.session.add_all(
            AuthEvent(
                occurred_at=utcnow() - timedelta(minutes=n),
                type="signin",
                outcome="success",
                user_id=ivy,
                provider="demo",
                ip=f"192.0.2.{n}",
                device="Firefox on Linux",
            )
            for n in range(1, 30)
        )
        db.session.commit()
    page.goto("/account")
    items = page.locator("#activity .activity__item")
    more = page.locator("#activity").get_by_role("link", name="Show more")
    expect(items).to_have_count(5)
    more.click()
    # htmx put the next 20 in the button's place, and a "Show more" for the rest after
    # them: still the account page.
    expect(items).to_have_count(25)
    more.click()
    expect(items).to_have_count(32)
    expect(more).to_have_count(0)
    assert page.url.endswith("/account")

    plain = new_page(java_script_enabled=False)
    demo_signin(plain, "ivy@example.com", javascript=False)
    plain.goto("/account")
    plain.locator("#activity").get_by_role("link", name="Show more").click()
    plain.wait_for_url("**/account/activity?before=*")
    expect(plain.get_by_role("heading", name="Recent activity")).to_be_visible()
    # 33 events (one more sign-in), 5 shown on the account page: a page of the next 20.
    expect(plain.locator(".activity__item")).to_have_count(20)


def _breaks_between_parts(locator: Any, text: str) -> list[int]:
    """Check that ``locator``'s text is ``text`` and that each of its lines after the first
    starts after a space or at an address's "@", "." or "-" (so no part of the address is
    cut, and no line ends in a hyphen that reads as a split word); return where lines start."""
    assert locator.evaluate("el => el.textContent") == text
    starts = locator.evaluate(LINE_STARTS)
    assert all(text[i] in "@.-" or text[i - 1] == " " for i in starts), [text[i:] for i in starts]
    return starts


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth - innerWidth") <= 0


def test_a_long_address_on_a_phone(new_page, live_server):
    """At 375 px: the address wraps only between its parts, the avatar sits with the name,
    the header keeps to two rows, the button with its "last used" badge to two lines."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = new_page(viewport={"width": 375, "height": 800})
    demo_signin(page, LONG_ADDRESS)
    # As if the address had been proven since: e-mail sign-in is then one of the ways in.
    with live_server.app.app_context():
        user = db.session.execute(db.select(User).where(User.email == LONG_ADDRESS)).scalar_one()
        user.email_verified = utcnow()
        db.session.commit()

    page.goto("/account")
    profile = page.locator("#profile")
    address = profile.locator(".address")
    assert _breaks_between_parts(address, LONG_ADDRESS), "the address fits on one line?"
    assert address.evaluate(
        "el => el.getBoundingClientRect().right"
        " <= el.closest('.panel').getBoundingClientRect().right"
    ), "the address sticks out of its panel"
    avatar = profile.locator(".avatar").bounding_box()
    name = profile.locator(".profile__name").bounding_box()
    assert avatar is not None and name is not None
    assert name["x"] >= avatar["x"] + avatar["width"], "the name is not beside the avatar"
    assert name["y"] < avatar["y"] + avatar["height"] and avatar["y"] < name["y"] + name["height"]
    _breaks_between_parts(profile.locator(".profile__name"), LONG_ADDRESS.split("@")[0])
    # The e-mail way in is listed with its address, and offers nothing to remove.
    email = page.locator("#accounts li", has_text="a link or code sent to")
    _breaks_between_parts(email.locator(".address"), LONG_ADDRESS)
    expect(email.get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("button", name="Remove Demo account")).to_be_visible()

    assert page.evaluate(HEADER_ROWS) <= 2
    who = page.get_by_role("navigation").get_by_role("link", name=LONG_ADDRESS)
    expect(who).to_have_attribute("title", LONG_ADDRESS)
    assert who.evaluate(LINES) < 1.5, "the address in the header wraps"
    _no_sideways_scroll(page)
    page.screenshot(path=SCREENSHOTS / "account-long-address-375.png", full_page=True)

    page.goto("/account/confirm")
    send = page.get_by_role("button", name=f"Send a sign-in code to {LONG_ADDRESS}")
    _breaks_between_parts(send.locator(":scope > span"), f"Send a sign-in code to {LONG_ADDRESS}")
    _no_sideways_scroll(page)
    page.screenshot(path=SCREENSHOTS / "confirm-long-address-375.png", full_page=True)

    # The sign-in page remembers the demo sign-in: its button says "last used".
    page.goto("/auth/signin")
    button = page.get_by_role("button", name="Sign in with Demo account")
    expect(button.locator(".badge")).to_have_text("last used")
    assert button.evaluate(LINES) <= 2.1, "the button with its badge takes over two lines"
    assert page.evaluate(HEADER_ROWS) <= 2
    _no_sideways_scroll(page)
    page.screenshot(path=SCREENSHOTS / "signin-last-used-375.png", full_page=True)
