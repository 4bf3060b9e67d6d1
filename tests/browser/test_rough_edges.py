"""Rough edges people met on the pages (issue "The learner's path and the person's",
section 2, and issue 45), each in headless Chromium: removals that confirm first and leave
no stale section, recovery codes to copy, download and print, what two-step verification
says about passkeys, a confirmation by e-mail that names what it confirms, "last used"
only after a sign-in that worked, tries left and the field's state after a wrong code, the
pages' primary buttons and language footers, the authenticator key at a phone's width,
the demo's sign-in as the secondary one, one spelling of e-mail, the built-in providers'
names in the page's language, and turning off two-step verification that confirms first.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from ..support.browser import axe_violations, demo_signin, set_up_app
from ..support.rows import add_passkey

pytestmark = pytest.mark.browser
LINK_RE = re.compile(r"https?://\S+/callback/email\S*")


def _user_id(live_server: Any, email: str) -> int:
    with live_server.app.app_context():
        return int(db.session.execute(db.select(User.id).where(User.email == email)).scalar_one())


def _add_passkey(live_server: Any, email: str, name: str) -> None:
    """Give the user a passkey row (nothing signs in with it here: it is a way in)."""
    add_passkey(live_server.app, _user_id(live_server, email), name, synced=False)


def _link(live_server: Any, email: str, provider: str = "op-jwt") -> None:
    user_id = _user_id(live_server, email)
    with live_server.app.app_context():
        db.session.add(
            Account(
                user_id=user_id, type="oidc", provider=provider, provider_account_id=f"s-{user_id}"
            )
        )
        db.session.commit()


def _verify_address(live_server: Any, email: str) -> None:
    with live_server.app.app_context():
        user = db.session.execute(db.select(User).where(User.email == email)).scalar_one()
        user.email_verified = utcnow()
        db.session.commit()


def _age_sessions(live_server: Any, email: str) -> None:
    """Make the user's sessions' last proof of presence older than the re-auth window."""
    user_id = _user_id(live_server, email)
    with live_server.app.app_context():
        old = utcnow() - timedelta(hours=1)
        db.session.execute(
            db.update(Session)
            .where(Session.user_id == user_id)
            .values(authenticated_at=old, created_at=old)
        )
        db.session.commit()


# -- 1. Removing a way in asks first, and every section it affects follows -----------------


def test_removing_a_provider_confirms_in_place_and_refreshes_the_passkeys(new_page, live_server):
    page = new_page()
    demo_signin(page, "rho@example.com")
    _add_passkey(live_server, "rho@example.com", "Phone")
    page.goto("/account")
    accounts, passkeys = page.locator("#accounts"), page.locator("#passkeys")
    expect(passkeys.get_by_role("button", name="Remove Phone")).to_be_visible()

    # "Remove" asks first, in place: nothing is removed yet, and "Cancel" closes it.
    accounts.get_by_role("button", name="Remove Demo account").click()
    question = accounts.get_by_text("Remove Demo account (development only)?")
    expect(question).to_be_focused()
    assert page.url.endswith("/account")
    accounts.get_by_role("link", name="Cancel").click()
    expect(question).to_have_count(0)
    expect(accounts.get_by_role("button", name="Remove Demo account")).to_be_focused()
    with live_server.app.app_context():
        assert db.session.execute(db.select(Account.id)).first() is not None

    accounts.get_by_role("button", name="Remove Demo account").click()
    accounts.get_by_role("button", name="Yes, remove Demo account (development only)").click()
    expect(accounts.get_by_role("status")).to_have_text(
        "Demo account (development only) was removed from your sign-in methods."
    )
    # The passkey is now the only way in: its section, swapped too, offers no "Remove".
    expect(passkeys.get_by_role("button", name="Remove Phone")).to_have_count(0)
    expect(passkeys).to_contain_text("This passkey is your only way to sign in")
    assert axe_violations(page) == []


def test_removing_a_passkey_confirms_first_and_refreshes_the_methods(new_page, live_server):
    page = new_page()
    demo_signin(page, "sig@example.com")
    _add_passkey(live_server, "sig@example.com", "Phone")
    page.goto("/account")
    accounts, passkeys = page.locator("#accounts"), page.locator("#passkeys")
    expect(accounts).to_contain_text("1 passkey")
    passkeys.get_by_role("button", name="Remove Phone").click()
    expect(passkeys.get_by_text("Remove the passkey “Phone”?")).to_be_focused()
    passkeys.get_by_role("button", name="Yes, remove “Phone”").click()
    expect(passkeys.get_by_role("status")).to_have_text(
        "The passkey “Phone” was removed; it no longer signs you in."
    )
    # The sign-in methods, swapped too: no passkey left, and the demo account is the last.
    expect(accounts).not_to_contain_text("1 passkey")
    expect(accounts.get_by_role("button", name="Remove Demo account")).to_have_count(0)


def test_removing_without_javascript_goes_through_a_confirmation_page(new_page, live_server):
    page = new_page(java_script_enabled=False)
    demo_signin(page, "tau@example.com", javascript=False)
    _link(live_server, "tau@example.com")
    _add_passkey(live_server, "tau@example.com", "Phone")
    page.goto("/account")
    page.locator("#accounts").get_by_role("button", name="Remove Initech").click()
    page.wait_for_url("**/account/accounts/*/unlink*")
    expect(page.get_by_role("heading", name="Remove Initech?")).to_be_visible()
    page.get_by_role("button", name="Yes, remove Initech").click()
    page.wait_for_url("**/account#accounts")
    expect(page.locator("#accounts [role=status]")).to_have_text(
        "Initech was removed from your sign-in methods."
    )
    page.locator("#passkeys").get_by_role("button", name="Remove Phone").click()
    page.wait_for_url("**/account/passkeys/*/remove*")
    expect(page.get_by_role("heading", name="Remove the passkey “Phone”?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/account#passkeys")
    expect(page.locator("#passkeys").get_by_role("button", name="Remove Phone")).to_be_visible()


# -- 2. Recovery codes: copy, download, print ----------------------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_recovery_codes_can_be_downloaded_copied_and_printed(new_page, live_server, javascript):
    page = new_page(java_script_enabled=javascript)
    if javascript:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    demo_signin(page, f"ups-{javascript}@example.com", javascript=javascript)
    _, codes = set_up_app(page, javascript=javascript)

    with page.expect_download() as download:
        page.get_by_role("button", name="Download as a text file").click()
    saved = download.value
    assert saved.suggested_filename.endswith(".txt")
    text = Path(saved.path()).read_text(encoding="utf-8")
    assert all(code in text for code in codes)
    # Still the page with the codes: nothing was lost by downloading them.
    expect(page.get_by_role("list", name="Recovery codes").locator("code")).to_have_count(10)

    copy = page.get_by_role("button", name="Copy the codes")
    if not javascript:
        expect(copy).to_be_hidden()
    else:
        copy.click()
        expect(page.get_by_text("Copied.")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()").split() == codes
        page.emulate_media(media="print")
        expect(page.locator(".site-header")).to_be_hidden()
        expect(page.locator(".site-footer")).to_be_hidden()
        expect(copy).to_be_hidden()
        for code in codes:
            expect(page.get_by_text(code, exact=True)).to_be_visible()


# -- 3. What two-step verification says about passkeys --------------------------------------


def test_two_step_verification_tells_the_truth_about_passkeys(new_page, live_server):
    page = new_page()
    demo_signin(page, "phi@example.com")
    set_up_app(page, javascript=True)
    _add_passkey(live_server, "phi@example.com", "Phone")
    page.goto("/account")
    section = page.locator("#two-factor")
    expect(section).not_to_contain_text("Every sign-in asks for a code")
    expect(section).to_contain_text(
        "A passkey that checks your fingerprint, face or screen lock is both steps at once"
    )


# -- 4. Confirming by e-mail before deleting the account says so ----------------------------


def test_confirming_by_e_mail_before_deleting_names_the_deletion(new_page, live_server):
    email = "chi@example.com"
    page = new_page()
    demo_signin(page, email)
    _verify_address(live_server, email)
    _age_sessions(live_server, email)
    page.goto("/account")
    page.locator("#delete").get_by_role("link", name="Confirm it is you").click()
    page.get_by_role("button", name=f"Send a sign-in code to {email}").click()
    page.wait_for_url("**/auth/verify-request*")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Check your e-mail to confirm deleting your account"
    )
    expect(page.locator("#card")).not_to_contain_text("A sign-in link has been sent")
    message = live_server.inbox.last_to(email)
    assert message["Subject"] == "Confirm deleting your account at Webapp"
    text = message.get_body(preferencelist=("plain",)).get_content()
    assert f"is deleting the account {email}" in text and "asked to sign in" not in text
    assert axe_violations(page) == []

    # With the code from the message, back to the deletion, now allowed.
    code = re.search(r"^ +([A-Z2-9]{4}-[A-Z2-9]{4})\s*$", text, re.M)[1]
    page.get_by_label(re.compile("code from the message")).fill(code)
    page.get_by_role("button", name="Confirm with the code").click()
    page.wait_for_url("**/account#delete")
    expect(page.locator("#delete").get_by_label("Type DELETE to confirm")).to_be_visible()


# -- 5. "Last used" only after a sign-in that worked ----------------------------------------


def test_last_used_is_the_last_sign_in_that_worked(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_be_visible()
    page.get_by_role("button", name="Sign in with Stark ID").click()  # the OP declines
    page.wait_for_url("**/auth/error?error=AccessDenied*")
    expect(page.get_by_text("Last time you signed in here")).to_have_count(0)
    page.goto("/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_be_visible()
    expect(page.locator("[data-island=chooser] .badge")).to_have_count(0)

    page.get_by_role("button", name="Sign in with Globex").click()
    page.wait_for_url(f"{live_server.url}/")
    page.goto("/auth/signout")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{live_server.url}/")
    page.goto("/auth/signin")
    first = page.locator("#provider-list button").first
    expect(first).to_contain_text("Continue with Globex")
    expect(page.locator("[data-island=chooser] .badge")).to_have_count(1)


# -- 6. Tries left, and the field's state after a wrong code --------------------------------


def test_the_second_factor_page_says_how_many_tries_are_left(new_page, live_server):
    page = new_page()
    demo_signin(page, "psi@example.com")
    set_up_app(page, javascript=True)
    other = new_page()
    demo_signin(other, "psi@example.com", lands_on="**/auth/second-factor")
    field = other.get_by_label("Code", exact=True)
    field.fill("999999")
    field.press("Enter")
    alert = other.get_by_role("alert")
    expect(alert).to_contain_text("You can try 4 more times.")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    assert alert.locator("p").get_attribute("id") in field.get_attribute("aria-describedby")


def test_a_wrong_e_mail_code_focuses_the_field_and_describes_it(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    field = page.locator("[data-island=chooser] #email-email")
    field.fill("omega@example.com")
    field.press("Enter")
    code = page.get_by_label(re.compile("code from the message"))
    code.fill("ABCD-2345")
    code.press("Enter")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("You can try 4 more times.")
    code = page.get_by_label(re.compile("code from the message"))
    expect(code).to_be_focused()
    expect(code).to_have_attribute("aria-invalid", "true")
    assert alert.locator("p").get_attribute("id") in code.get_attribute("aria-describedby")


# -- 7. Primary buttons, language footers, the key at 375 px --------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_not_found_leads_home_and_signed_out_sign_out_leads_to_sign_in(
    new_page, live_server, javascript
):
    page = new_page(java_script_enabled=javascript)
    page.goto("/no-such-page")
    expect(page.locator("#error-page a.button").first).to_have_text("Go to the home page")
    expect(page.get_by_role("link", name="Try signing in again")).to_have_count(0)
    page.goto("/auth/signout")
    expect(page.get_by_text("You are not signed in.")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    page.locator("#card").get_by_role("link", name="Sign in").click()
    page.wait_for_url("**/auth/signin")


def test_the_e_mail_link_page_has_a_language_footer_that_keeps_it(new_page, live_server):
    page = new_page()
    page.goto("/auth/signin")
    field = page.locator("[data-island=chooser] #email-email")
    field.fill("kappa@example.com")
    field.press("Enter")
    expect(page.locator("#email-code-form")).to_be_visible()
    text = live_server.inbox.last_to("kappa@example.com").get_body(("plain",)).get_content()
    link = urlsplit(LINK_RE.search(text)[0])
    page.goto(f"{link.path}?{link.query}")
    footer = page.get_by_role("navigation", name="Language")
    footer.get_by_role("link", name="Deutsch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    # The same page (the same link), now in German, and it still signs in.
    assert urlsplit(page.url).path == link.path
    page.get_by_role("button", name="Als kappa@example.com anmelden").click()
    page.wait_for_url(f"{live_server.url}/")


def test_the_recovery_codes_page_has_a_language_footer_that_keeps_the_codes(new_page, live_server):
    page = new_page(java_script_enabled=False)
    demo_signin(page, "lam@example.com", javascript=False)
    _, codes = set_up_app(page, javascript=False)
    page.get_by_role("navigation", name="Language").get_by_role("button", name="العربية").click()
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator(".recovery-codes code")).to_have_text(codes)
    expect(page.get_by_role("heading", level=1)).not_to_have_text("Two-step verification is on")


def test_the_authenticator_key_wraps_between_its_groups_at_375_px(new_page, live_server):
    page = new_page(viewport={"width": 375, "height": 800})
    demo_signin(page, "mu@example.com")
    page.goto("/account/two-factor")
    key = page.locator("#totp-key")
    text = key.inner_text()
    starts = key.evaluate(
        """el => {
          const starts = []; let top = null; let index = 0;
          const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let k = 0; k < node.length; k++, index++) {
              const range = document.createRange();
              range.setStart(node, k); range.setEnd(node, k + 1);
              const box = range.getClientRects()[0];
              if (!box || !node.data[k].trim()) continue;
              if (top !== null && box.top > top + 2) starts.push(index);
              if (top === null || box.top > top + 2) top = box.top;
            }
          }
          return starts;
        }"""
    )
    assert starts, "the key fits on one line at 375 px?"
    assert all(text[i - 1] == " " for i in starts), [text[i:] for i in starts]


# -- 8. The demo's sign-in is visibly the secondary one -------------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_demo_sign_in_is_secondary_to_the_e_mail_one(new_page, live_server, javascript):
    page = new_page(java_script_enabled=javascript)
    page.goto("/auth/signin")
    if javascript:
        expect(page.locator("[data-island=chooser]")).to_be_visible()
    email = page.get_by_role("button", name="Sign in with E-mail")
    demo = page.get_by_role("button", name="Sign in with Demo account")
    background = "el => getComputedStyle(el).backgroundColor"
    assert email.evaluate(background) != demo.evaluate(background)
    expect(demo).to_have_class(re.compile(r"\bbutton--secondary\b"))
    expect(email).not_to_have_class(re.compile(r"\bbutton--secondary\b"))


# -- 9. One spelling of e-mail ---------------------------------------------------------------

#: "Email" or "email" as a word: neither is how the pages, or the e-mails, write it.
EMAIL_AS_A_WORD = re.compile(r"\bemail\b", re.IGNORECASE)


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_e_mail_is_spelled_one_way_in_english_and_in_german(new_page, live_server, javascript):
    page = new_page(java_script_enabled=javascript)
    page.goto("/auth/signin")
    if javascript:
        expect(page.locator("[data-island=chooser]")).to_be_visible()
    body = page.locator("body")
    expect(body).not_to_contain_text(EMAIL_AS_A_WORD)
    page.get_by_label("E-mail address").fill("nu@example.com")
    page.get_by_role("button", name="Sign in with E-mail").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your e-mail")
    expect(body).not_to_contain_text(EMAIL_AS_A_WORD)
    text = live_server.inbox.last_to("nu@example.com").get_body(("plain",)).get_content()
    assert not EMAIL_AS_A_WORD.search(re.sub(r"https?://\S+", "", text)), text

    page.get_by_role("navigation", name="Language").get_by_role("link", name="Deutsch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    page.goto("/auth/signin")
    if javascript:
        expect(page.locator("[data-island=chooser]")).to_be_visible()
    expect(page.get_by_role("button", name="Mit E-Mail anmelden")).to_be_visible()
    expect(body).not_to_contain_text(EMAIL_AS_A_WORD)


# -- 10. The built-in providers' names, in the page's language -------------------------------


def test_built_in_providers_are_named_in_the_page_s_language(new_page, live_server):
    email = "omi@example.com"
    page = new_page()
    demo_signin(page, email)
    _add_passkey(live_server, email, "Phone")
    page.goto("/account")
    page.get_by_role("navigation", name="Language").get_by_role("link", name="Deutsch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")

    # The account page's ways in, and the question before removing one.
    accounts = page.locator("#accounts")
    expect(accounts.locator("strong").first).to_have_text("Demokonto (nur Entwicklung)")
    accounts.get_by_role("button", name="Entfernen Demokonto (nur Entwicklung)").click()
    expect(accounts.get_by_text("Demokonto (nur Entwicklung) entfernen?")).to_be_focused()
    accounts.get_by_role("link", name="Abbrechen").click()

    # The chooser island, whose names come from the page, not from GET providers.
    page.goto("/auth/signin")
    island = page.locator("[data-island=chooser]")
    expect(island).to_be_visible()
    expect(island.get_by_role("button", name="Mit E-Mail anmelden")).to_be_visible()
    expect(
        island.get_by_role("button", name="Mit Demokonto (nur Entwicklung) anmelden")
    ).to_be_visible()
    expect(island).not_to_contain_text("Demo account")

    # The error page's island: the provider of the last sign-in that worked.
    page.goto("/auth/error?error=AccessDenied")
    expect(page.locator("#error-page")).to_contain_text(
        "Zuletzt haben Sie sich hier mit Demokonto (nur Entwicklung) angemeldet."
    )


# -- 11. Turning off two-step verification asks first ---------------------------------------


def test_turning_off_two_step_verification_confirms_in_place(new_page, live_server):
    page = new_page()
    demo_signin(page, "eta@example.com")
    _verify_address(live_server, "eta@example.com")  # e-mail sign-in among the ways in
    set_up_app(page, javascript=True)
    page.goto("/account")
    expect(page.locator("#accounts")).not_to_contain_text("makes a link alone not enough")
    section = page.locator("#two-factor")

    # "Turn off" asks first, in place: nothing changes yet, and "Cancel" closes it.
    section.get_by_role("button", name="Turn off").click()
    question = section.get_by_text("Turn off two-step verification?")
    expect(question).to_be_focused()
    expect(section).to_contain_text("your recovery codes will stop working")
    assert page.url.endswith("/account")
    section.get_by_role("link", name="Cancel").click()
    expect(question).to_have_count(0)
    expect(section.get_by_role("button", name="Turn off")).to_be_focused()
    expect(section).to_contain_text("Recovery codes left: 10 of 10.")

    section.get_by_role("button", name="Turn off").click()
    section.get_by_role("button", name="Yes, turn off two-step verification").click()
    expect(section.get_by_role("status")).to_have_text(
        "Two-step verification is off; your recovery codes no longer work."
    )
    expect(section.get_by_role("link", name="Set up an authenticator app")).to_be_visible()
    # The ways in, which say what two-step verification adds, are re-rendered too.
    expect(page.locator("#accounts")).to_contain_text("makes a link alone not enough")
    assert axe_violations(page) == []


def test_turning_off_without_javascript_goes_through_a_confirmation_page(new_page, live_server):
    page = new_page(java_script_enabled=False)
    demo_signin(page, "theta@example.com", javascript=False)
    set_up_app(page, javascript=False)
    page.goto("/account")
    turn_off = page.locator("#two-factor").get_by_role("button", name="Turn off")
    turn_off.click()
    page.wait_for_url("**/account/two-factor/off*")
    expect(page.get_by_role("heading", name="Turn off two-step verification?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/account#two-factor")

    turn_off.click()
    page.get_by_role("button", name="Yes, turn off two-step verification").click()
    page.wait_for_url("**/account#two-factor")
    expect(page.locator("#two-factor [role=status]")).to_have_text(
        "Two-step verification is off; your recovery codes no longer work."
    )
    # Off already: there is nothing to ask about.
    page.goto("/account/two-factor/off")
    page.wait_for_url("**/account#two-factor")
