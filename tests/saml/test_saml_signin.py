"""SP-initiated SAML sign-in against SimpleSAMLphp (the ``simplesamlphp`` fixture): the app
through its own routes (Flask test client), the IdP over real HTTP (``SimpleSamlIdp.login``,
a ``requests`` session as the browser).

Covered: our metadata and ``GET providers``; a full sign-in (the AuthnRequest and its
cookie, the IdP's login form, the signed response posted back) and the rows it writes, with
the IdP's metadata from its URL or a file; the address verified only in the provider's
domains; and, each refused with ``OAuthCallback``, no session and no row: a replayed
response (in the same browser, and in another that still holds the request's cookie: the
database's record of the assertion refuses it), a response to another browser's request,
and responses forged from a real one (unsigned, changed under the IdP's signature, signed
again by a key not in the IdP's metadata). An IdP whose metadata cannot be had is
``OAuthSignin`` before the browser leaves; ``flask auth cleanup`` deletes spent assertions
past their time.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp.storage.db import db
from webapp.storage.models import Account, SpentSamlAssertion, User

from ..support.oauth import error_of
from ..support.rows import row_count
from ..support.servers import free_port
from . import forgery
from .signin_steps import (
    DESTINATION,
    assert_refused,
    counts,
    post_response,
    request_cookie,
    start,
    start_answer,
)
from .simplesamlphp import ACS_URL, SP_ENTITY_ID, SP_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e

MD = "{urn:oasis:names:tc:SAML:2.0:metadata}"


def user_by_email(app: Flask, email: str) -> User:
    with app.app_context():
        user: User = db.session.query(User).filter_by(email=email).one()
        db.session.expunge(user)
        return user


def test_our_metadata_names_our_entity_and_assertion_consumer(saml_app: Flask) -> None:
    answer = saml_app.test_client().get(f"/auth/saml/{SP_ID}/metadata")
    assert answer.status_code == 200
    assert answer.mimetype == "application/samlmetadata+xml"
    root = ET.fromstring(answer.data)
    assert root.get("entityID") == SP_ENTITY_ID
    consumers = root.findall(f"{MD}SPSSODescriptor/{MD}AssertionConsumerService")
    assert [(c.get("Binding"), c.get("Location")) for c in consumers] == [
        ("urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST", ACS_URL)
    ]
    assert root.find(f".//{MD}KeyDescriptor") is not None  # our certificate


def test_providers_lists_the_saml_provider(saml_app: Flask) -> None:
    listed = saml_app.test_client().get("/auth/providers").json
    assert listed[SP_ID]["type"] == "saml"  # type: ignore[index]
    assert listed[SP_ID]["name"] == "Acme staff"  # type: ignore[index]
    assert listed[SP_ID]["callbackUrl"] == ACS_URL  # type: ignore[index]


def test_sign_in_through_the_idp(saml_app: Flask, simplesamlphp: SimpleSamlIdp) -> None:
    client = saml_app.test_client()
    started = start_answer(client)
    redirect = str(started.headers["Location"])
    assert redirect.startswith(simplesamlphp.base_url + "saml2/idp/SSOService.php?SAMLRequest=")
    # The request's cookie: SameSite=None (the IdP's POST is cross-site), so Secure, and
    # sent back to the assertion consumer alone.
    cookie = request_cookie(started)
    for attribute in (f"Path=/auth/callback/{SP_ID}", "SameSite=None", "Secure", "HttpOnly"):
        assert attribute in cookie.split("; ")

    posted = simplesamlphp.login(redirect, "ann")
    assert posted.action == ACS_URL
    answer = post_response(client, posted.saml_response)
    assert answer.status_code == 302
    assert answer.headers["Location"] == f"http://localhost{DESTINATION}"

    session = client.get("/auth/session").json
    assert session["user"]["email"] == "ann@acme.example"  # type: ignore[index]
    assert session["user"]["name"] == "Ann Acme"  # type: ignore[index]
    assert counts(saml_app) == (1, 1, 1, 1)
    # The identity is the IdP's entity ID and the NameID.
    subject = f"{simplesamlphp.entity_id} ann"
    assert row_count(saml_app, Account, provider=SP_ID, type="saml", provider_account_id=subject)
    # acme.example is the provider's domain: its address counts as verified.
    assert user_by_email(saml_app, "ann@acme.example").email_verified is not None


def test_an_address_outside_the_declared_domains_is_not_verified(
    saml_app: Flask, simplesamlphp: SimpleSamlIdp
) -> None:
    client = saml_app.test_client()
    posted = simplesamlphp.login(start(client), "bob")
    assert error_of(post_response(client, posted.saml_response)) is None
    assert user_by_email(saml_app, "bob@elsewhere.example").email_verified is None


def test_a_replayed_response_is_refused(saml_app: Flask, simplesamlphp: SimpleSamlIdp) -> None:
    client = saml_app.test_client()
    started = start_answer(client)
    posted = simplesamlphp.login(str(started.headers["Location"]), "ann")
    # Another browser holding the same request's cookie (copied before the first use):
    # the cookie still names the request, so only the spent assertion refuses it.
    twin = saml_app.test_client()
    name, _, value = request_cookie(started).split(";")[0].partition("=")
    twin.set_cookie(name, value, path=f"/auth/callback/{SP_ID}")
    assert error_of(post_response(client, posted.saml_response)) is None
    before = counts(saml_app)
    assert_refused(saml_app, twin, post_response(twin, posted.saml_response), before)
    # The same browser, signed out: its cookie for the request is gone as well.
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    client.post("/auth/signout", data={"csrfToken": csrf})
    before = counts(saml_app)
    assert_refused(saml_app, client, post_response(client, posted.saml_response), before)


def test_a_response_to_another_browsers_request_is_refused(
    saml_app: Flask, simplesamlphp: SimpleSamlIdp
) -> None:
    victim, attacker = saml_app.test_client(), saml_app.test_client()
    posted = simplesamlphp.login(start(victim), "ann")
    before = counts(saml_app)
    # The attacker's browser, with a request of its own pending, and with none.
    start(attacker)
    assert_refused(saml_app, attacker, post_response(attacker, posted.saml_response), before)
    stranger = saml_app.test_client()
    assert_refused(saml_app, stranger, post_response(stranger, posted.saml_response), before)
    # The browser it was meant for still signs in with it.
    assert error_of(post_response(victim, posted.saml_response)) is None


@pytest.mark.parametrize("forgery_kind", ["unsigned", "changed under the signature", "own key"])
def test_a_forged_response_is_refused(
    saml_app: Flask, simplesamlphp: SimpleSamlIdp, tmp_path: Path, forgery_kind: str
) -> None:
    client = saml_app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    genuine = forgery.decoded(posted.saml_response)
    assert forgery.name_id_of(genuine) == "ann"
    if forgery_kind == "unsigned":
        forged = forgery.unsigned(genuine)
    elif forgery_kind == "changed under the signature":
        forged = forgery.with_name_id(genuine, "bob")
    else:
        forged = forgery.signed_by_own_key(forgery.with_name_id(genuine, "bob"), tmp_path)
        # A good signature, by a key that is not the IdP's.
        assert forgery.verifies_with_own_key(forged, tmp_path)
    before = counts(saml_app)
    assert_refused(saml_app, client, post_response(client, forgery.encoded(forged)), before)
    # The genuine response for the same request still signs in: the refusal spent nothing.
    assert error_of(post_response(client, posted.saml_response)) is None


def test_cleanup_deletes_the_assertions_past_their_time(
    saml_app: Flask, simplesamlphp: SimpleSamlIdp
) -> None:
    client = saml_app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    assert error_of(post_response(client, posted.saml_response)) is None
    with saml_app.app_context():
        spent = db.session.scalars(sa.select(SpentSamlAssertion)).one()
        db.session.expunge(spent)
        # Kept while the assertion could still be presented: until its bearer
        # confirmation's NotOnOrAfter, and the clock skew.
        assert spent.expires > datetime.now(UTC)
        now = datetime.now(UTC)
        db.session.add(
            SpentSamlAssertion(
                provider=SP_ID, assertion_hash="0" * 64, expires=now - timedelta(seconds=1)
            )
        )
        db.session.commit()
    result = saml_app.test_cli_runner().invoke(args=["auth", "cleanup"])
    assert result.exit_code == 0, result.output
    assert "deleted 1 remembered SAML assertion(s)" in result.output
    with saml_app.app_context():
        left = db.session.scalars(sa.select(SpentSamlAssertion.assertion_hash)).all()
    assert left == [spent.assertion_hash]


def test_metadata_from_a_file_signs_in_alike(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp, tmp_path: Path
) -> None:
    (tmp_path / "idp.xml").write_text(simplesamlphp.metadata())
    app = make_oauth_app(
        [{"id": SP_ID, "type": "saml", "idp_metadata_file": str(tmp_path / "idp.xml")}]
    )
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    assert error_of(post_response(client, posted.saml_response)) is None
    assert counts(app) == (1, 1, 1, 1)


def test_an_idp_whose_metadata_cannot_be_had_stops_the_sign_in_before_it_leaves(
    make_oauth_app: Callable[..., Flask],
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/metadata"
    app = make_oauth_app([{"id": SP_ID, "type": "saml", "idp_metadata_url": nobody}])
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    answer = client.post(f"/auth/signin/{SP_ID}", data={"csrfToken": csrf})
    assert error_of(answer) == "OAuthSignin"
    assert not any(c.startswith("auth.saml-request.") for c in answer.headers.getlist("Set-Cookie"))


def test_the_signin_page_offers_the_provider_as_a_button(saml_app: Flask) -> None:
    page = saml_app.test_client().get("/auth/signin").get_data(as_text=True)
    form = re.search(
        rf'<form method="post" action="/auth/signin/{SP_ID}"[^>]*>(.*?)</form>', page, re.S
    )
    assert form is not None
    assert f'data-provider="{SP_ID}"' in form.group(1)
    assert "Acme staff" in form.group(1)
