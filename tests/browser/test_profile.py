"""The account page's profile in Chromium, with JavaScript on (htmx swaps the section in
place) and off (each form posts and comes back to the section): setting a name, and
changing the e-mail address through the link mailed to the new one."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from webapp.storage.db import db
from webapp.storage.models import User

from ..support.browser import axe_violations, demo_signin
from ..support.mail import text_of

pytestmark = pytest.mark.browser
CHANGE_LINK = re.compile(r"https?://\S+/account/email/confirm\?token=\S+")


def _user(live_server: Any, user_id: int) -> tuple[str | None, str | None, bool]:
    with live_server.app.app_context():
        user = db.session.get(User, user_id)
        assert user is not None
        return user.name, user.email, user.email_verified is not None


def _user_id(live_server: Any, email: str) -> int:
    with live_server.app.app_context():
        return int(db.session.execute(db.select(User.id).where(User.email == email)).scalar_one())


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_name_is_set_and_the_address_changed_by_its_link(new_page, live_server, javascript):
    page = new_page(java_script_enabled=javascript)
    mode = "js" if javascript else "plain"
    old, new = f"pia-{mode}@example.com", f"pia.new-{mode}@example.org"
    demo_signin(page, old, javascript=javascript)
    user_id = _user_id(live_server, old)
    page.goto("/account")
    profile = page.locator("#profile")
    # The demo account names its user after the address's local part.
    expect(profile.locator(".profile__name")).to_have_text(f"pia-{mode}")

    # A name: set in place (htmx), or through a post that comes back to the section.
    profile.get_by_label("Your name").fill("  Pia Lee ")
    profile.get_by_role("button", name="Save the name").click()
    expect(profile.get_by_role("status")).to_have_text("Your name is now “Pia Lee”.")
    expect(profile.locator(".profile__name")).to_have_text("Pia Lee")
    assert page.url.endswith("/account" if javascript else "/account#profile")
    assert _user(live_server, user_id)[0] == "Pia Lee"

    # One that is too long is refused, saying why; the name stays.
    profile.get_by_label("Your name").fill("P" * 101)
    profile.get_by_role("button", name="Save the name").click()
    expect(profile.get_by_role("alert")).to_have_text(
        "A name can have at most 100 characters, and no control characters."
    )
    expect(profile.locator(".profile__name")).to_have_text("Pia Lee")
    assert _user(live_server, user_id)[0] == "Pia Lee"
    if javascript:
        assert axe_violations(page) == []

    # The address: a link goes to the new one, and the section says so.
    profile.get_by_label("New e-mail address").fill(new)
    profile.get_by_role("button", name="Send a confirmation link").click()
    expect(profile.get_by_role("status")).to_contain_text(f"A link was sent to {new}.")
    expect(profile).to_contain_text("it expires")
    expect(profile.get_by_role("button", name="Cancel the change")).to_be_visible()
    assert _user(live_server, user_id)[1] == old

    link = CHANGE_LINK.search(text_of(live_server.inbox.last_to(new)))
    assert link is not None
    parts = urlsplit(link[0])
    page.goto(f"{parts.path}?{parts.query}")
    expect(page.get_by_role("heading", name="Confirm your new e-mail address")).to_be_visible()
    assert _user(live_server, user_id)[1] == old
    page.get_by_role("button", name="Confirm the new address").click()
    page.wait_for_url("**/account#profile")
    profile = page.locator("#profile")
    expect(profile.get_by_role("status")).to_have_text(f"Your e-mail address is now {new}.")
    expect(profile.locator(".facts")).to_contain_text("verified")
    expect(profile.get_by_role("button", name="Cancel the change")).to_have_count(0)
    assert _user(live_server, user_id) == ("Pia Lee", new, True)
    if javascript:
        assert axe_violations(page) == []

    # An empty name clears it.
    profile.get_by_label("Your name").fill("")
    profile.get_by_role("button", name="Save the name").click()
    expect(profile.get_by_role("status")).to_have_text("Your name was removed.")
    expect(profile.locator(".profile__name")).to_have_text("No name given")
    assert _user(live_server, user_id)[0] is None
