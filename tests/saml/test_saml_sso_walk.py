"""The whole walk of single sign-on by e-mail domain through a SAML identity provider
(SimpleSAMLphp, which knows our key pair: ``KEYED_SP_ID``): a person of acme.example types
their address into the e-mail form, is offered the IdP instead of a message, signs in
there, comes back signed in, and signs out at both ends (the IdP's session is gone: the
next sign-in asks for the password again)."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

import pytest
from flask import Flask

from webapp.storage.models import Session, User, VerificationToken

from ..support.mail import Mailbox
from ..support.oauth import error_of
from ..support.rows import row_count
from .keyed_steps import (
    DESTINATION,
    app_path,
    idp_redirect,
    keyed_entry,
    post_response,
    sign_out,
    start,
)
from .simplesamlphp import KEYED_SLO_URL, KEYED_SP_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e


def test_an_acme_address_signs_in_at_the_idp_and_out_at_both_ends(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp, mailbox: Mailbox
) -> None:
    entries = [{"id": "email", "type": "email"}, keyed_entry(simplesamlphp)]
    app = make_oauth_app(entries, EMAIL_SERVER=mailbox.url(), EMAIL_TIMEOUT="5")
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]

    # The e-mail form: no sign-in link (no token to mail); the sign-in page offers the IdP.
    typed = client.post(
        "/auth/signin/email",
        data={"csrfToken": csrf, "email": "Ann@ACME.example", "callbackUrl": DESTINATION},
    )
    assert typed.status_code == 302
    page = client.get(app_path(typed.headers["Location"])).get_data(as_text=True)
    offer = re.search(rf'data-sso-provider="{KEYED_SP_ID}">(.*?)</div>', page, re.S)
    assert offer is not None, page
    assert "Continue with Acme keyed" in offer.group(1)
    action = unescape(re.search(r'<form method="post" action="([^"]+)"', offer.group(1))[1])
    assert row_count(app, VerificationToken) == 0
    assert mailbox.messages == []

    # Continue: to the IdP, and back signed in as the IdP says.
    to_idp = client.post(action, data={"csrfToken": csrf, "callbackUrl": DESTINATION})
    assert to_idp.status_code == 302
    posted = simplesamlphp.login(str(to_idp.headers["Location"]), "ann")
    landed = post_response(client, posted.saml_response)
    assert error_of(landed) is None
    assert landed.headers["Location"] == f"http://localhost{DESTINATION}"
    session = client.get("/auth/session").json
    assert session is not None and session["user"]["email"] == "ann@acme.example"
    assert row_count(app, User) == 1

    # Signing out here signs out at the IdP too, and comes back.
    answer = sign_out(client)
    assert client.get("/auth/session").json is None
    assert row_count(app, Session) == 0
    back = idp_redirect(simplesamlphp, posted.browser, str(answer.headers["Location"]))
    assert back.startswith(KEYED_SLO_URL + "?SAMLResponse=")
    assert client.get(app_path(back)).headers["Location"] == f"http://localhost{DESTINATION}"
    assert simplesamlphp.asks_for_password(start(client), posted.browser)
