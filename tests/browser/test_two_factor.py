"""Two-step verification in headless Chromium: set up the authenticator app from the
account page with its key, QR code and recovery codes, then sign in through the
second-factor page, with JavaScript on and off, at a phone's width; axe finds nothing
serious on either page."""

from __future__ import annotations

import re
from typing import Any

import pyotp
import pytest
from playwright.sync_api import expect

from ..support.browser import axe_violations, demo_signin

pytestmark = pytest.mark.browser


def set_up_app(page: Any, *, javascript: bool) -> tuple[str, list[str]]:
    """Turn the authenticator app on from the account page; return its key and codes.
    (Scans and measurements run scripts in the page: only with JavaScript on.)"""
    page.goto("/account")
    page.get_by_role("link", name="Set up an authenticator app").click()
    expect(page.get_by_role("heading", name="Set up an authenticator app")).to_be_visible()
    expect(page.get_by_role("img", name=re.compile("QR code"))).to_be_visible()
    if javascript:
        assert axe_violations(page) == []
        width = page.viewport_size["width"]
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    key = page.locator("#totp-key").inner_text().replace(" ", "")
    page.get_by_label("Code from the app").fill("000000")
    page.get_by_role("button", name="Turn on two-step verification").click()
    expect(page.get_by_role("alert")).to_contain_text("That code is not right")
    page.get_by_label("Code from the app").fill(pyotp.TOTP(key).now())
    page.get_by_role("button", name="Turn on two-step verification").click()
    expect(page.get_by_role("heading", name="Two-step verification is on")).to_be_visible()
    codes = page.get_by_role("list", name="Recovery codes").locator("code").all_inner_texts()
    assert len(codes) == 10
    if javascript:
        assert axe_violations(page) == []
    return key, codes


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_set_up_then_sign_in_with_a_recovery_code(new_page: Any, javascript: bool) -> None:
    page = new_page(java_script_enabled=javascript, viewport={"width": 375, "height": 800})
    email = f"tf-{'js' if javascript else 'nojs'}@example.com"
    demo_signin(page, email, javascript=javascript)
    _, codes = set_up_app(page, javascript=javascript)
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
