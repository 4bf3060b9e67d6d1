"""Every page, light and dark, phone and desktop: screenshots and an axe-core scan.

Screenshots go to test-artifacts/screenshots/<page>-<light|dark>-<width>.png. They are
taken once, on PostgreSQL: the pages look the same on SQLite.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..support.browser import SCREENSHOTS, axe_violations, demo_signin, settled

pytestmark = pytest.mark.browser
LINK_RE = re.compile(r"https?://\S+/callback/email\S*")

#: name -> (path, signed in?)
PAGES = {
    "signin": ("/auth/signin", False),
    "signin-error": ("/auth/signin?error=OAuthAccountNotLinked", False),
    "verify-request": ("/auth/verify-request?provider=email&type=email", False),
    "email-confirm": (None, False),  # the link from a real message, filled in below
    "error": ("/auth/error?error=Verification", False),
    "home": ("/", True),
    "account": ("/account", True),
    "activity": ("/account/activity", True),
    "signout": ("/auth/signout", True),
}


def _email_link(page, live_server, address: str) -> str:
    page.goto("/auth/signin")
    page.get_by_label("E-mail address").fill(address)
    page.get_by_label("E-mail address").press("Enter")
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()
    message = live_server.inbox.last_to(address)
    return LINK_RE.search(message.get_body(preferencelist=("plain",)).get_content())[0]


@pytest.mark.parametrize("width", [375, 1280])
def test_pages_screenshots_and_accessibility(new_page, live_server, database_url, width):
    if not database_url.startswith("postgresql"):
        pytest.skip("screenshots and the scan run once, on PostgreSQL")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    visitor = new_page(viewport={"width": width, "height": 900})
    member = new_page(viewport={"width": width, "height": 900})
    demo_signin(member, f"kim-{width}@example.com")
    # A second session, so the sessions table has another device to show.
    demo_signin(new_page(), f"kim-{width}@example.com")
    paths = dict(PAGES)
    paths["email-confirm"] = (_email_link(visitor, live_server, f"lu-{width}@example.com"), False)

    found = {}
    for name, (path, signed_in) in paths.items():
        page = member if signed_in else visitor
        page.goto(path)
        settled(page)
        if name.startswith("signin"):
            expect(page.locator("[data-island=chooser]")).to_be_visible()
        # Nothing may stick out sideways, down to the narrowest phones (320 px).
        for check_width in [320, width] if width < 400 else [width]:
            page.set_viewport_size({"width": check_width, "height": 900})
            overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
            assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {check_width}px"
        # Each colour scheme on the same page (prefers-color-scheme, as the browser says it).
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.screenshot(path=SCREENSHOTS / f"{name}-{scheme}-{width}.png", full_page=True)
            violations = axe_violations(page)
            if violations:
                found[f"{name} ({scheme})"] = violations
        page.emulate_media(color_scheme="light")
    assert found == {}
