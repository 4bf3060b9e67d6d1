"""The browser's steps at the app for the SAML tests (Flask test client): start a sign-in,
post a response to the assertion consumer; and what a refusal must leave (``assert_refused``:
``OAuthCallback``, no row written, no session)."""

from __future__ import annotations

import base64
import re
import zlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

from flask import Flask
from flask.testing import FlaskClient

from webapp.storage.models import Account, Session, SpentSamlAssertion, User

from ..support.oauth import error_of
from ..support.rows import row_count
from .simplesamlphp import SP_ID, SimpleSamlIdp

DESTINATION = "/account"


def provider_entry(idp: SimpleSamlIdp) -> dict[str, Any]:
    """The app's provider table for ``idp`` (``SP_ID``, its metadata from its URL, its
    signature checked)."""
    return {
        "id": SP_ID,
        "type": "saml",
        "name": "Acme staff",
        "idp_metadata_url": idp.metadata_url,
        "idp_metadata_cert_file": str(idp.metadata_signing_pair[1]),
        "domains": ["acme.example"],
    }


def start_answer(client: FlaskClient) -> Any:
    """POST signin/<id> as the sign-in page does; return the app's answer."""
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    answer = client.post(
        f"/auth/signin/{SP_ID}", data={"csrfToken": csrf, "callbackUrl": DESTINATION}
    )
    assert answer.status_code == 302, answer.data[:500]
    return answer


def start(client: FlaskClient) -> str:
    """Start a sign-in; return the IdP's URL the app redirects to."""
    return str(start_answer(client).headers["Location"])


def request_id_of(redirect_url: str) -> str:
    """The ID of the AuthnRequest in the IdP's URL (HTTP-Redirect: deflated, base64)."""
    carried = parse_qs(urlsplit(redirect_url).query)["SAMLRequest"][0]
    request = zlib.decompress(base64.b64decode(carried), -zlib.MAX_WBITS).decode()
    found = re.search(r'\bID="([^"]+)"', request)
    assert found is not None, request
    return found.group(1)


def request_cookie(answer: Any) -> str:
    """The Set-Cookie header of the AuthnRequest's cookie in a sign-in's answer."""
    found = [c for c in answer.headers.getlist("Set-Cookie") if c.startswith("auth.saml-request.")]
    assert len(found) == 1, answer.headers
    return str(found[0])


def post_response(client: FlaskClient, saml_response: str) -> Any:
    """POST a SAMLResponse to the assertion consumer as the IdP's page makes the browser
    do: cross-site, so with no CSRF token."""
    return client.post(f"/auth/callback/{SP_ID}", data={"SAMLResponse": saml_response})


def counts(app: Flask) -> tuple[int, int, int, int]:
    return (
        row_count(app, User),
        row_count(app, Account),
        row_count(app, Session),
        row_count(app, SpentSamlAssertion),
    )


def assert_refused(app: Flask, client: FlaskClient, answer: Any, before: tuple[int, ...]) -> None:
    assert error_of(answer) == "OAuthCallback"
    assert counts(app) == before
    assert client.get("/auth/session").json is None
