"""Every page in Arabic (right to left) and German (long words), at a phone's and a
desktop's width, in headless Chromium: nothing sticks out sideways, no button or field
cuts its text off, and axe finds nothing serious. Also: ``lang`` and ``dir`` follow the
language, and the footer's choice beats the browser's Accept-Language.

Each page is looked at in both widths by resizing the window, so the walk through the
pages (sign-ins, two-step set-up, a code on the TV) is made once per language. What
depends on the width (sideways scrolling, clipped text) is checked at both; axe, whose
rules read the document's structure, names and colours, scans each language at one width:
Arabic at the phone's, German at the desktop's.

Screenshots go to test-artifacts/screenshots/lang-<language>-<page>-<width>.png. Run once,
on PostgreSQL: the pages are the same on SQLite.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pyotp
import pytest
from playwright.sync_api import expect

from webapp.storage.db import db
from webapp.storage.models import User

from ..support.browser import SCREENSHOTS, axe_violations, settled
from ..support.rows import add_passkey
from ..support.tv import TV_PROVIDERS

pytestmark = pytest.mark.browser
LINK_RE = re.compile(r"https?://\S+/callback/email\S*")

#: Buttons, button-like links and fields whose text must fit inside them.
CLIPPED = """() => [...document.querySelectorAll(
    "button, .button, summary, input:not([type=hidden]), select, textarea")]
  .filter((el) => el.getClientRects().length && getComputedStyle(el).visibility !== "hidden")
  .filter((el) => el.scrollWidth > el.clientWidth + 1)
  .map((el) => `${el.outerHTML.slice(0, 100)}… (${el.scrollWidth}px in ${el.clientWidth}px)`)"""


#: The widths each page is checked at: a phone's and a desktop's.
WIDTHS = (375, 1280)
#: The width each language's pages are scanned by axe at.
AXE_WIDTH = {"ar": 375, "de": 1280}


def _open(new_page: Any, language: str, base_url: str) -> Any:
    """A browser whose chosen language is ``language`` (the footer's cookie)."""
    page = new_page(viewport={"width": WIDTHS[0], "height": 900}, base_url=base_url)
    page.context.add_cookies([{"name": "auth.locale", "value": language, "url": base_url}])
    return page


def _sign_in(page: Any, email: str, *, lands_on: str = "**/") -> None:
    """The demo credentials form, found by its fields' names (the labels are translated)."""
    page.goto("/auth/signin")
    page.locator("[data-island=chooser]").wait_for()
    form = page.locator("form", has=page.locator("input[name=password]"))
    form.locator("input[name=email]").fill(email)
    form.locator("input[name=password]").fill("demo")
    form.locator("button[type=submit]").click()
    page.wait_for_url(lands_on)


def _add_passkey(live_server: Any, email: str) -> int:
    """Give the user a passkey row (a way in to remove); return its id."""
    with live_server.app.app_context():
        user_id = db.session.execute(db.select(User.id).where(User.email == email)).scalar_one()
    return add_passkey(live_server.app, user_id, "iCloud Keychain")


class Checks:
    """What each page must pass; problems are collected by page, reported at the end."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.problems: dict[str, list[Any]] = {}
        self.seen: list[str] = []

    def page(self, page: Any, name: str) -> None:
        """Check ``page`` as it is now at each width (back at the first one after)."""
        settled(page)
        self.seen.append(name)
        lang, direction = page.evaluate("[document.documentElement.lang, document.dir]")
        expected = "rtl" if self.language == "ar" else "ltr"
        if (lang, direction) != (self.language, expected):
            self.problems[name] = [f"<html lang={lang!r} dir={direction!r}>"]
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            found: list[Any] = []
            overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
            if overflow > 0:
                found.append(f"scrolls sideways by {overflow}px")
            found += page.evaluate(CLIPPED)
            if width == AXE_WIDTH[self.language]:
                found += axe_violations(page)
            page.screenshot(
                path=SCREENSHOTS / f"lang-{self.language}-{name}-{width}.png", full_page=True
            )
            if found:
                self.problems[f"{name} at {width}px"] = found
        page.set_viewport_size({"width": WIDTHS[0], "height": 900})


@pytest.mark.parametrize("language", ["ar", "de"])
def test_every_page_fits_and_passes_axe(new_page, live_server, database_url, tv, language):
    if not database_url.startswith("postgresql"):
        pytest.skip("the pages are checked once, on PostgreSQL")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    checks = Checks(language)
    tag = language

    visitor = _open(new_page, language, live_server.url)
    for name, path in [
        ("signin", "/auth/signin"),
        ("signin-error", "/auth/signin?error=OAuthAccountNotLinked&callbackUrl=/account"),
        ("verify-request", "/auth/verify-request?provider=email&type=email"),
        (
            "verify-request-delete",
            "/auth/verify-request?provider=email&type=email&purpose=delete-account",
        ),
        ("error", "/auth/error?error=Verification"),
        ("not-found", "/no-such-page"),
        ("signout-signed-out", "/auth/signout"),
        ("device-none", "/auth/device"),
    ]:
        visitor.goto(path)
        if name.startswith("signin"):
            expect(visitor.locator("[data-island=chooser]")).to_be_visible()
        checks.page(visitor, name)

    # The e-mail link's page, from a real message (in the language of the browser that asked).
    address = f"lu-{tag}@example.com"
    visitor.goto("/auth/signin")
    visitor.locator("[data-island=chooser] #email-email").fill(address)
    visitor.locator("[data-island=chooser] #email-email").press("Enter")
    expect(visitor.locator("#email-code-form")).to_be_visible()  # swapped in by htmx
    checks.page(visitor, "verify-request-sent")
    text = live_server.inbox.last_to(address).get_body(preferencelist=("plain",)).get_content()
    link = urlsplit(LINK_RE.search(text)[0])
    visitor.goto(f"{link.path}?{link.query}")
    checks.page(visitor, "email-confirm")

    member = _open(new_page, language, live_server.url)
    email = f"kim-{tag}@example.com"
    _sign_in(member, email)
    _sign_in(_open(new_page, language, live_server.url), email)  # a 2nd session
    passkey = _add_passkey(live_server, email)  # so that "Remove" asks about one
    for name, path in [
        ("home", "/"),
        ("account", "/account"),
        ("activity", "/account/activity"),
        ("signout", "/auth/signout"),
        ("confirm", "/account/confirm?next=/account"),
        ("remove-passkey", f"/account/passkeys/{passkey}/remove"),
    ]:
        member.goto(path)
        checks.page(member, name)

    # Two-step verification: its set-up (a wrong code first), the recovery codes, and the
    # second-factor page of the next sign-in (a wrong code there too).
    member.goto("/account/two-factor")
    checks.page(member, "two-factor-setup")
    key = member.locator("#totp-key").inner_text().replace(" ", "")
    member.locator("#totp-code").fill("000000")
    member.locator("#totp-code").press("Enter")
    expect(member.locator("[role=alert]")).to_be_visible()
    checks.page(member, "two-factor-setup-wrong-code")
    member.locator("#totp-code").fill(pyotp.TOTP(key).now())
    member.locator("#totp-code").press("Enter")
    expect(member.locator(".recovery-codes")).to_be_visible()
    checks.page(member, "two-factor-codes")
    member.goto("/account")
    checks.page(member, "account-two-factor-on")
    second = _open(new_page, language, live_server.url)
    _sign_in(second, email, lands_on="**/auth/second-factor")
    checks.page(second, "second-factor")
    second.locator("#second-factor-code").fill("999999")
    second.locator("#second-factor-code").press("Enter")
    expect(second.locator("[role=alert]")).to_be_visible()
    checks.page(second, "second-factor-wrong-code")

    # Sign-in with a code, on the TV (an app whose providers offer it).
    device = _open(new_page, language, tv.url)
    device.goto("/auth/device")
    checks.page(device, "device")
    device.locator("button[data-provider=op-tv]").click()
    device.wait_for_url(f"{tv.url}/auth/device/op-tv/status")
    expect(device.locator(".user-code")).to_be_visible()
    checks.page(device, "device-code")
    assert TV_PROVIDERS["op-tv"][0] in device.locator("h1").inner_text()

    assert len(checks.seen) == 24
    assert checks.problems == {}


def test_the_language_follows_the_choice_over_the_browser_s(new_page, live_server):
    page = new_page(locale="fr-FR")
    page.goto("/auth/signin?callbackUrl=/account")
    assert page.evaluate("[document.documentElement.lang, document.dir]") == ["fr", "ltr"]
    expect(page.get_by_role("heading", level=1)).to_have_text("Se connecter à Webapp")

    # The footer's link keeps the choice and comes back to the same page, query and all.
    page.get_by_role("navigation", name="Langue").get_by_role("link", name="Deutsch").click()
    page.wait_for_url("**/auth/signin?callbackUrl=/account")
    assert page.evaluate("[document.documentElement.lang, document.dir]") == ["de", "ltr"]
    # The island, mounted over the page, says the same words: they come from the page.
    island = page.locator("[data-island=chooser]")
    expect(island).to_be_visible()
    expect(island.get_by_label("E-Mail-Adresse")).to_be_visible()
    expect(
        island.get_by_role("button", name="Mit Demokonto (nur Entwicklung) anmelden")
    ).to_be_visible()
    expect(page.locator("footer a[aria-current=true]")).to_have_text("Deutsch")

    page.get_by_role("navigation", name="Sprache").get_by_role("link", name="العربية").click()
    page.wait_for_url("**/auth/signin?callbackUrl=/account")
    assert page.evaluate("[document.documentElement.lang, document.dir]") == ["ar", "rtl"]
    expect(page.get_by_role("heading", level=1)).to_have_text("تسجيل الدخول إلى Webapp")
    # Without JavaScript too: the links are plain links.
    plain = new_page(locale="es-ES", java_script_enabled=False)
    plain.goto("/auth/error?error=Verification")
    expect(plain.locator("html")).to_have_attribute("lang", "es")
    plain.get_by_role("link", name="العربية").click()
    plain.wait_for_url("**/auth/error?error=Verification")
    expect(plain.locator("html")).to_have_attribute("dir", "rtl")
    expect(plain.get_by_role("heading", level=1)).to_have_text("لم يعد رابط تسجيل الدخول هذا يعمل")
