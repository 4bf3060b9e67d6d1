"""Passkeys in headless Chromium with its virtual authenticator (the DevTools protocol's
WebAuthn domain): add one from the account page, sign out, sign in with "Sign in with a
passkey" and, where the browser offers it, from the e-mail field's suggestions; an
authenticator that holds no passkey fails cleanly; without JavaScript nothing is offered.

Browsers refuse passkeys on an IP address, so this app is served as ``localhost``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from playwright.sync_api import expect

from webapp import create_app
from webapp.storage.db import db
from webapp.storage.models import Authenticator, Session

from ..support.browser import axe_violations, demo_signin, served
from ..support.config import base_config

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def localhost(database_url: str) -> Iterator[tuple[str, Flask]]:
    """The app on a loopback port, under the name ``localhost``: (origin, app)."""

    def build(origin: str) -> Flask:
        local = origin.replace("127.0.0.1", "localhost")
        return create_app(base_config(database_url, AUTH_URL=f"{local}/auth"), environ={})

    with served(build) as (origin, app):
        yield origin.replace("127.0.0.1", "localhost"), app


@pytest.fixture
def local_page(new_page: Any, localhost: tuple[str, Flask]) -> Any:
    """``local_page(**options)``: a page in a fresh context on the localhost app."""
    return lambda **options: new_page(base_url=localhost[0], **options)


def add_authenticator(page: Any, **options: Any) -> tuple[Any, str]:
    """Give ``page`` a virtual platform authenticator (CTAP2, internal, resident keys, user
    verification that succeeds); return the DevTools session and its id."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    made = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
                **options,
            }
        },
    )
    return cdp, made["authenticatorId"]


def without_conditional_ui(page: Any) -> None:
    """Make ``page`` a browser without conditional UI (passkeys among a field's
    suggestions), which the chooser must do without: a button and the browser's dialog.

    Chromium's virtual authenticator answers a conditional request by itself as soon as it
    holds a passkey for the site, as if the person had picked it at once.
    """
    page.add_init_script(
        "if (window.PublicKeyCredential) "
        "PublicKeyCredential.isConditionalMediationAvailable = async () => false;"
    )


def credentials(cdp: Any, authenticator_id: str) -> list[dict[str, Any]]:
    return list(
        cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator_id})["credentials"]
    )


def add_passkey(page: Any, email: str, name: str) -> None:
    """Sign in with the demo credentials and add a passkey named ``name`` from the account page."""
    demo_signin(page, email)
    page.goto("/account")
    section = page.locator("#passkeys")
    section.get_by_label("Name of the new passkey (optional)").fill(name)
    section.get_by_role("button", name="Add a passkey").click()
    expect(section.locator(".notice")).to_have_text("Passkey added. You can now sign in with it.")
    expect(section.locator("li").filter(has_text=name)).to_contain_text("this device only")


def sign_out(page: Any) -> None:
    page.goto("/auth/signout")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/")


def session_email(page: Any) -> str | None:
    body = page.evaluate("() => fetch('/auth/session').then((r) => r.json())")
    return body["user"]["email"] if body else None


def test_add_a_passkey_sign_out_and_sign_in_with_it(
    local_page: Any, localhost: tuple[str, Flask]
) -> None:
    page = local_page()
    without_conditional_ui(page)
    cdp, authenticator = add_authenticator(page)
    add_passkey(page, "pia@example.com", "Laptop")
    (stored,) = credentials(cdp, authenticator)
    assert stored["isResidentCredential"] is True
    assert axe_violations(page) == []

    sign_out(page)
    assert session_email(page) is None
    page.goto("/auth/signin")
    page.get_by_role("button", name="Sign in with a passkey").click()
    page.wait_for_url("**/")
    assert session_email(page) == "pia@example.com"
    with localhost[1].app_context():
        (session,) = db.session.scalars(sa.select(Session))
        (passkey,) = db.session.scalars(sa.select(Authenticator))
    assert session.provider == "passkey" and session.amr == "hwk user mfa"
    assert passkey.name == "Laptop" and passkey.last_used_at is not None
    # The authenticator signed once more than at registration.
    assert credentials(cdp, authenticator)[0]["signCount"] == passkey.sign_count


def test_an_authenticator_without_a_passkey_fails_cleanly(local_page: Any) -> None:
    # Conditional UI on: its request waits (no passkey to offer) until the button's dialog
    # replaces it.
    page = local_page()
    cdp, authenticator = add_authenticator(page)
    page.goto("/auth/signin")
    button = page.get_by_role("button", name="Sign in with a passkey")
    button.click()
    expect(page.get_by_role("alert").filter(has_text="No passkey was used")).to_be_visible()
    expect(button).to_be_enabled()
    assert credentials(cdp, authenticator) == []
    # The page still works: another way in.
    demo_signin(page, "quinn@example.com")
    assert session_email(page) == "quinn@example.com"


def test_the_button_pressed_while_the_fields_wait_is_still_answered(local_page: Any) -> None:
    """The e-mail field's passkey wait (conditional UI) fetches its options first, slowly;
    the button pressed meanwhile must not lose its ceremony to it (one challenge cookie per
    browser, and a newer browser request aborts an older one)."""
    page = local_page()
    add_authenticator(page)
    delayed: list[str] = []

    def slow_first_options(route: Any) -> None:
        if not delayed:
            delayed.append(route.request.url)
            time.sleep(1.5)
        route.continue_()

    page.route("**/auth/webauthn-options/passkey*", slow_first_options)
    page.goto("/auth/signin")
    page.get_by_role("button", name="Sign in with a passkey").click()
    expect(page.get_by_role("alert").filter(has_text="No passkey was used")).to_be_visible()
    assert delayed, "the field's wait asked for no options: conditional UI did not start"


def test_a_second_authenticator_holds_no_credential(local_page: Any) -> None:
    page = local_page()
    without_conditional_ui(page)
    first_cdp, first = add_authenticator(page)
    add_passkey(page, "rae@example.com", "Phone")
    sign_out(page)
    # The passkey stays on the first authenticator; a second one in its place has none.
    first_cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": first})
    second_cdp, second = add_authenticator(page)
    page.goto("/auth/signin")
    page.get_by_role("button", name="Sign in with a passkey").click()
    expect(page.get_by_role("alert").filter(has_text="No passkey was used")).to_be_visible()
    assert credentials(second_cdp, second) == []
    assert session_email(page) is None


def test_conditional_ui_where_the_browser_offers_it(
    local_page: Any, localhost: tuple[str, Flask]
) -> None:
    page = local_page()
    add_authenticator(page)
    page.goto("/")
    if not page.evaluate("() => PublicKeyCredential.isConditionalMediationAvailable?.() ?? false"):
        pytest.skip("this Chromium offers no conditional mediation")
    add_passkey(page, "sam@example.com", "Laptop")
    sign_out(page)
    # The sign-in page asks for a passkey from the e-mail field's suggestions as it loads;
    # the virtual authenticator picks its passkey for the person: signed in, no click.
    page.goto("/auth/signin")
    page.wait_for_url("**/")
    assert session_email(page) == "sam@example.com"
    with localhost[1].app_context():
        (session,) = db.session.scalars(sa.select(Session))
    assert session.provider == "passkey"


def test_without_javascript_no_passkey_is_offered(local_page: Any) -> None:
    page = local_page(java_script_enabled=False)
    page.goto("/auth/signin")
    expect(page.get_by_text("passkey", exact=False)).to_have_count(0)
    demo_signin(page, "tess@example.com", javascript=False)
    page.goto("/account")
    section = page.locator("#passkeys")
    expect(section.get_by_role("button", name="Add a passkey")).to_be_hidden()
    expect(section.get_by_text("Adding a passkey needs JavaScript.")).to_be_visible()
