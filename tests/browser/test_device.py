"""Sign-in with a code (RFC 8628) in a real browser: the page polls with htmx, or reloads
itself without JavaScript; the QR code; accessibility; signing out at the provider.

A second live server ("the TV") on the same database, whose providers are device flow
clients of the live server's OpenID Provider; the person's phone is the provider's own
verification pages, driven over HTTP (``NodeOP.approve_device``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from webapp.storage.db import db

from ..support.browser import axe_violations
from ..support.tv import TV, TV_PROVIDERS

pytestmark = pytest.mark.browser

QR_NAME = "QR code: Acme TV's page with the code filled in"


def _start(page: Any, tv: TV, provider: str = "op-tv", callback: str = "/account") -> str:
    """From the device page, get a code; return it as shown."""
    page.goto(f"/auth/device?callbackUrl={callback}")
    name = TV_PROVIDERS[provider][0]
    page.get_by_role("button", name=f"Get a code for {name}").click()
    page.wait_for_url(f"{tv.url}/auth/device/{provider}/status")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Enter the code at {name}")
    return str(page.locator(".user-code").inner_text()).strip()


def test_signs_in_by_itself_with_javascript(new_page: Any, tv: TV) -> None:
    page = new_page(base_url=tv.url)
    page.goto("/auth/device")
    assert axe_violations(page) == []
    polls: list[dict[str, str]] = []
    page.on(
        "request",
        lambda r: r.url.endswith("/auth/device/op-tv/status") and polls.append(r.headers),
    )
    user_code = _start(page, tv)

    # The QR code is an image with a name, drawn inline: nothing is fetched for it.
    qr = page.get_by_role("img", name=QR_NAME)
    expect(qr).to_be_visible()
    assert qr.evaluate("el => el.tagName.toLowerCase()") == "svg"
    box = qr.bounding_box()
    assert box is not None and box["width"] >= 100 and box["height"] >= 100
    link = page.get_by_role("link", name=f"{tv.op.issuer}/device")
    expect(link).to_have_attribute("href", f"{tv.op.issuer}/device")
    assert axe_violations(page) == []

    # htmx polls in place (the address does not change) while the code waits, replacing
    # only the status line: focus stays on the button, the QR code is the same element.
    expect(page.locator("#device-status")).to_contain_text("Waiting for you to approve it.")
    button = page.get_by_role("button", name="I have approved it")
    button.focus()
    qr.evaluate("el => { el.dataset.seen = 'yes'; }")
    page.wait_for_timeout(1500)
    assert sum(h.get("hx-request") == "true" for h in polls) >= 1, polls
    assert page.url == f"{tv.url}/auth/device/op-tv/status"
    expect(button).to_be_focused()
    assert qr.evaluate("el => el.dataset.seen") == "yes"

    tv.op.approve_device(user_code, "alice")
    page.wait_for_url(f"{tv.url}/account", timeout=10_000)
    expect(page.get_by_text("alice@example.com").first).to_be_visible()
    page.goto("/")
    expect(page.get_by_text("You are signed in as")).to_contain_text("alice@example.com")


@pytest.mark.parametrize("how", ["refresh", "button"])
def test_signs_in_without_javascript(new_page: Any, tv: TV, how: str) -> None:
    page = new_page(base_url=tv.url, java_script_enabled=False)
    if how == "refresh":
        # Interval 1 s: the page reloads itself (<noscript> meta refresh) until approved.
        user_code = _start(page, tv)
        expect(page.get_by_role("img", name=QR_NAME)).to_be_visible()
        tv.op.approve_device(user_code, "alice")
        page.wait_for_url(f"{tv.url}/account", timeout=10_000)
    else:
        # Interval 10 s: long before the page would reload itself, "I have approved it".
        user_code = _start(page, tv, "op-tv-slow")
        tv.op.approve_device(user_code, "alice")
        tv.due(user_code)
        page.get_by_role("button", name="I have approved it").click()
        page.wait_for_url(f"{tv.url}/account", timeout=5_000)
    expect(page.get_by_text("alice@example.com").first).to_be_visible()


def test_expired_code_page(new_page: Any, tv: TV) -> None:
    page = new_page(base_url=tv.url)
    user_code = _start(page, tv)
    tv.op.expire_device_code(user_code)
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text("The code has expired")
    # The whole card was swapped in place; focus moves to its new heading.
    assert page.url == f"{tv.url}/auth/device/op-tv/status"
    expect(heading).to_be_focused()
    expect(page.get_by_role("img", name=QR_NAME)).to_have_count(0)
    expect(page.locator(".user-code")).to_have_count(0)
    assert axe_violations(page) == []

    # No more polling; a new code is one button away.
    page.wait_for_timeout(1200)
    expect(heading).to_have_text("The code has expired")
    page.get_by_role("button", name="Get a new code for Acme TV").click()
    expect(heading).to_have_text("Enter the code at Acme TV")
    assert page.locator(".user-code").inner_text().strip() != user_code


def test_code_running_out_on_an_open_page_says_it_expired(new_page: Any, tv: TV) -> None:
    """op-tv-short's codes live 3 s. The open page, polling, must end on "The code has
    expired" (what happened, with a button for a new code), not on "No code in progress"
    ("this browser has no sign-in with a code in progress"), which is not what happened."""
    page = new_page(base_url=tv.url)
    _start(page, tv, "op-tv-short")
    heading = page.get_by_role("heading", level=1)
    expect(heading).not_to_have_text("Enter the code at Short TV", timeout=8_000)
    expect(heading).to_have_text("The code has expired")


def test_sign_out_page_names_the_provider_and_signs_out_there(new_page: Any, tv: TV) -> None:
    page = new_page(base_url=tv.url)
    user_code = _start(page, tv, callback="/")
    tv.op.approve_device(user_code, "alice")
    page.wait_for_url(f"{tv.url}/", timeout=10_000)

    page.goto("/auth/signout")
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign out")
    expect(
        page.get_by_text("This also signs you out of Acme TV, which will then send you back here.")
    ).to_be_visible()
    assert axe_violations(page) == []

    visited: list[str] = []
    page.on("request", lambda r: r.is_navigation_request() and visited.append(r.url))
    page.get_by_role("button", name="Sign out").click()
    # Through the provider's end_session endpoint and back to the app, signed out.
    page.wait_for_url(f"{tv.url}/", timeout=10_000)
    assert any(u.startswith(tv.op.issuer + "/session/end") for u in visited), visited
    assert any(u.startswith(tv.url + "/auth/signout/callback?state=") for u in visited), visited
    assert page.context.request.get(f"{tv.url}/auth/session").json() is None
    deadline = time.monotonic() + 5
    with tv.app.app_context():
        while db.session.execute(sa.text("SELECT count(*) FROM sessions")).scalar_one():
            assert time.monotonic() < deadline
            time.sleep(0.1)
