"""Signing in, in a real browser: the chooser island, e-mail and OIDC end to end, errors."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..support.browser import demo_signin

pytestmark = pytest.mark.browser
LINK_RE = re.compile(r"https?://\S+/callback/email\S*")


def _tab_to(page, locator, limit: int = 15) -> None:
    """Press Tab until ``locator`` has focus: it must be reachable by keyboard."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if locator.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{locator} not reached with Tab")


def test_chooser_filter_keyboard_oidc_and_last_used(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_be_visible()
    buttons = page.locator("#provider-list button")
    expect(buttons).to_have_count(6)
    expect(page.locator('#provider-list img[src$=".svg"]')).to_have_count(6)

    # Keyboard only: Tab to the filter, type, arrow down to the match, Enter.
    search = page.get_by_label("Find your sign-in provider")
    _tab_to(page, search)
    page.keyboard.type("glo")
    expect(buttons).to_have_count(1)
    expect(page.get_by_text("Showing 1 of 6")).to_be_visible()
    page.keyboard.press("ArrowDown")
    expect(buttons.first).to_be_focused()
    page.keyboard.press("Enter")

    # Through the real OpenID Provider and back, signed in as its account "ann".
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_text("You are signed in as")).to_contain_text("ann@example.com")

    # Next time, this browser offers Globex first.
    page.goto("/auth/signin")
    first = buttons.first
    expect(first).to_contain_text("Continue with Globex")
    expect(first).to_contain_text("last used")
    expect(page.locator("[data-island=chooser]")).to_be_visible()


def test_pending_state_blocks_a_double_submit(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    acme = page.get_by_role("button", name="Sign in with Acme SSO")
    # Hold the redirect back until both clicks are in: the second must not send anything.
    posts: list[str] = []
    page.on("request", lambda r: r.method == "POST" and posts.append(r.url))
    acme.dblclick()
    page.wait_for_url(f"{live_server.url}/")
    assert [p for p in posts if "/auth/signin/" in p] == [f"{live_server.url}/auth/signin/op-basic"]


def test_email_sign_in_end_to_end(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_be_visible()
    field = page.get_by_label("E-mail address")
    field.fill("erin@example")
    field.press("Enter")
    expect(page.get_by_text("Check the part after the @")).to_be_visible()
    expect(field).to_have_attribute("aria-invalid", "true")

    field.fill("erin@example.com")
    field.press("Enter")
    # htmx swaps "Check your e-mail" into the card; the address bar does not change.
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_focused()
    assert page.url == f"{live_server.url}/auth/signin"

    message = live_server.inbox.last_to("erin@example.com")
    body = message.get_body(preferencelist=("plain",)).get_content()
    link = LINK_RE.search(body)[0]
    page.goto(link)
    page.get_by_role("button", name="Sign in as erin@example.com").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_text("You are signed in as")).to_contain_text("erin@example.com")


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_error_pages(new_page, live_server, javascript):
    page = new_page(java_script_enabled=javascript)
    cases = [
        ("Verification", 403, "This sign-in link no longer works", "Request a new sign-in link"),
        ("Configuration", 500, "Server configuration problem", "Go to the home page"),
        ("Nonsense", 200, "Something went wrong", "Try signing in again"),
    ]
    for code, status, title, first_step in cases:
        response = page.goto(f"/auth/error?error={code}")
        assert response.status == status
        expect(page.get_by_role("heading", level=1)).to_have_text(title)
        expect(page.locator("#error-page a.button").first).to_have_text(first_step)
        expect(page.get_by_text(response.headers["x-request-id"])).to_be_visible()
        island = page.locator("[data-island=error-page]")
        expect(island).to_have_count(1 if javascript else 0)
        copy = page.get_by_role("button", name="Copy reference")
        expect(copy).to_have_count(1 if javascript else 0)

    # A sign-in code is shown on the sign-in page, in the alert region, where one can retry.
    page.goto("/auth/error?error=OAuthSignin")
    expect(page.get_by_role("alert")).to_contain_text("Could not reach the sign-in provider")


def test_declined_oidc_sign_in_shows_a_helpful_error_page(new_page, live_server):
    page = new_page()
    demo_signin(page, "fay@example.com")  # so "last used" has something to say
    page.goto("/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_be_visible()
    page.get_by_role("button", name="Sign in with Stark ID").click()
    page.wait_for_url("**/auth/error?error=AccessDenied*")
    expect(page.get_by_role("heading", level=1)).to_have_text("Access denied")
    # The declined attempt is not the last sign-in that worked: the demo's is.
    expect(
        page.get_by_text("Last time you signed in here with Demo account (development only).")
    ).to_be_visible()
    page.get_by_role("link", name="Sign in with another account").click()
    page.wait_for_url("**/auth/signin")
