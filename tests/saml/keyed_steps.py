"""The app registered at SimpleSAMLphp as ``KEYED_SP_ID`` (our key pair known to the IdP:
encrypted assertions, single logout), and the browser's steps at it (Flask test client)
and at the IdP (``idp_redirect``), for the encryption, logout, metadata and walk tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests
from flask import Flask
from flask.testing import FlaskClient

from ..support.oauth import error_of
from .signin_steps import provider_entry
from .simplesamlphp import KEYED_SP_ID, SimpleSamlIdp

DESTINATION = "/account"


def keyed_entry(idp: SimpleSamlIdp, *, own_keys: bool = True, **fields: Any) -> dict[str, Any]:
    """The provider table; with the key pair the IdP knows, or (``own_keys=False``) with
    one made at start, which the IdP never saw."""
    key, cert = idp.sp_key_pair
    keys = {"sp_key_file": str(key), "sp_cert_file": str(cert)} if own_keys else {}
    return {**provider_entry(idp), "id": KEYED_SP_ID, "name": "Acme keyed", **keys, **fields}


def keyed_app(make_oauth_app: Callable[..., Flask], idp: SimpleSamlIdp, **entry: Any) -> Flask:
    return make_oauth_app([keyed_entry(idp, **entry)])


def start(client: FlaskClient) -> str:
    """Start a sign-in; return the IdP's URL the app redirects to."""
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    answer = client.post(
        f"/auth/signin/{KEYED_SP_ID}", data={"csrfToken": csrf, "callbackUrl": DESTINATION}
    )
    assert answer.status_code == 302, answer.data[:500]
    return str(answer.headers["Location"])


def post_response(client: FlaskClient, saml_response: str) -> Any:
    return client.post(f"/auth/callback/{KEYED_SP_ID}", data={"SAMLResponse": saml_response})


def sign_in(client: FlaskClient, idp: SimpleSamlIdp, username: str = "ann") -> Any:
    """A whole sign-in at the IdP; return the IdP browser (its session there)."""
    posted = idp.login(start(client), username)
    answer = post_response(client, posted.saml_response)
    assert error_of(answer) is None, answer.headers.get("Location")
    return posted.browser


def app_path(url: str) -> str:
    """``url`` (under the test app's http://localhost) as the test client's path."""
    parts = urlsplit(url)
    assert parts.netloc == "localhost", url
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def sign_out(client: FlaskClient) -> Any:
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    return client.post("/auth/signout", data={"csrfToken": csrf, "callbackUrl": DESTINATION})


def idp_redirect(idp: SimpleSamlIdp, browser: requests.Session, url: str) -> str:
    """GET ``url`` at the IdP, following its redirects within it; return where it sends
    the browser next (to us, or the RelayState)."""
    for _ in range(5):
        answer = browser.get(url, allow_redirects=False, timeout=10)
        assert answer.status_code in (302, 303), answer.text[:2000]
        url = str(answer.headers["Location"])
        if not url.startswith(idp.base_url + "module.php/"):
            return url
    raise AssertionError(f"the IdP keeps redirecting: {url}")
