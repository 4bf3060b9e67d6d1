"""Two-step verification in headless Chromium: set up the authenticator app from the
account page with its key, QR code and recovery codes, then sign in through the
second-factor page, with JavaScript on and off, at a phone's width; axe finds nothing
serious on either page."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from ..support.browser import axe_violations, demo_signin, set_up_app

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_set_up_then_sign_in_with_a_recovery_code(new_page: Any, javascript: bool) -> None:
    page = new_page(java_script_enabled=javascript, viewport={"width": 375, "height": 800})
    email = f"tf-{'js' if javascript else 'nojs'}@example.com"
    demo_signin(page, email, javascript=javascript)
    _, codes = set_up_app(page, javascript=javascript, scan=True)
    page.get_by_role("link", name="I have saved them").click()
    expect(page.locator("#two-factor")).to_contain_text("10 of 10")

    # A new browser: the first factor leads to the second-factor page, not a session.
    other = new_page(java_script_enabled=javascript, viewport={"width": 375, "height": 800})
    demo_signin(other, email, javascript=javascript, lands_on="**/auth/second-factor")
    expect(other.get_by_role("heading", name="Two-step verification")).to_be_visible()
    assert other.context.request.get("/auth/session").json() is None
    if javascript:
        assert axe_violations(other) == []
        # Nothing on the page is wider than the phone's screen.
        assert other.evaluate("() => document.documentElement.scrollWidth") <= 375
    other.get_by_label("Code").fill(codes[0])
    other.get_by_role("button", name="Verify").click()
    other.goto("/account")
    expect(other.locator("#two-factor")).to_contain_text("9 of 10")
