"""Single sign-on by e-mail domain through a SAML identity provider, in a real browser: a
person of acme.example types their address, is offered Acme's IdP (SimpleSAMLphp), signs in
there, comes back signed in, and signs out at both ends (the IdP's session is gone: the
next sign-in there asks for the password again). With JavaScript on (SimpleSAMLphp's page
posts the response by itself) and off (its "Submit" button).

The app is served as http://localhost and the IdP as http://127.0.0.1: two sites, so the
IdP's POST back is cross-site, as in production, and the request cookie it needs is the
SameSite=None one (Secure, which Chromium honours on http://localhost). The IdP knows this
app's entity ID and key pair (``register_service_provider``): assertions come encrypted,
and single logout is signed both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import expect

from ..saml.keyed_steps import keyed_entry
from ..saml.simplesamlphp import KEYED_SP_ID, USERS, SimpleSamlIdp
from ..support.browser import Inbox, live_app, served

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ANN = "ann@acme.example"


@pytest.fixture(scope="module")
def saml_origin(
    database_url: str,
    smtp_inbox: Inbox,
    simplesamlphp: SimpleSamlIdp,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("saml-live")
    origins: list[str] = []

    def build(loopback: str) -> Flask:
        origin = loopback.replace("//127.0.0.1:", "//localhost:")
        origins.append(origin)
        simplesamlphp.register_service_provider(
            f"{origin}/auth/saml/{KEYED_SP_ID}/metadata", KEYED_SP_ID
        )
        entries = [
            {"id": "email", "type": "email"},
            keyed_entry(simplesamlphp, name="Acme staff"),
        ]
        return live_app(database_url, origin, entries, smtp_inbox, workdir)

    with served(build):
        yield origins[0]


def sign_in_at_the_idp(page: Any, idp: SimpleSamlIdp, *, javascript: bool) -> None:
    """At SimpleSAMLphp's login form: Ann's user name and password, then (without
    JavaScript) the button that posts the response back."""
    assert page.url.startswith(idp.base_url), page.url
    page.locator("input[name=username]").fill("ann")
    page.locator("input[name=password]").fill(USERS["ann"][0])
    page.locator("input[name=password]").press("Enter")
    if not javascript:
        # The page's <button>, shown without JavaScript; beside it is an <input> of the same
        # name that SimpleSAMLphp's script clicks, hidden only once its stylesheet is in.
        page.locator("button", has_text="Submit").click()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_an_acme_address_signs_in_at_the_saml_idp_and_out_at_both_ends(
    new_page: Any, saml_origin: str, simplesamlphp: SimpleSamlIdp, javascript: bool
) -> None:
    page = new_page(java_script_enabled=javascript, base_url=saml_origin)
    page.goto(f"{saml_origin}/auth/signin")
    page.get_by_label("E-mail address").fill(ANN)
    page.get_by_role("button", name="Sign in with E-mail").click()
    expect(page.get_by_text(f"{ANN} signs in through Acme staff.")).to_be_visible()
    page.get_by_role("button", name="Continue with Acme staff").click()
    page.wait_for_url(f"{simplesamlphp.base_url}**")
    sign_in_at_the_idp(page, simplesamlphp, javascript=javascript)
    page.wait_for_url(f"{saml_origin}/")
    expect(page.get_by_text("You are signed in as")).to_contain_text(ANN)

    # Signing out here goes through the IdP's single logout and back.
    page.get_by_role("navigation").get_by_role("link", name="Sign out").click()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{saml_origin}/")
    assert page.context.request.get(f"{saml_origin}/auth/session").json() is None

    # The IdP's session is gone too: the next sign-in there asks for the password.
    page.goto(f"{saml_origin}/auth/signin")
    page.get_by_label("E-mail address").fill(ANN)
    page.get_by_role("button", name="Sign in with E-mail").click()
    page.get_by_role("button", name="Continue with Acme staff").click()
    page.wait_for_url(f"{simplesamlphp.base_url}**")
    expect(page.locator("input[name=password]")).to_be_visible()
