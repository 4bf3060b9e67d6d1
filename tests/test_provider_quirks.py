"""What identity providers other than oidc-provider need, each rule checked against a fake
provider that records what it is sent and answers what the test sets (tests/interop runs
the real ones: django-oauth-toolkit and Glewlwyd).

- ``client_id`` in the body with JWT client authentication and in the device
  authorization request (Glewlwyd, django-oauth-toolkit, mock providers need it);
- the RFC 8414 document for the endpoints an OpenID discovery document leaves out
  (django-oauth-toolkit names revocation, introspection and device endpoints only there),
  and a warning at start-up where revocation is asked for and no endpoint can be found;
- revoking the access token as well as the refresh token (Glewlwyd keeps JWT access
  tokens alive);
- log lines that carry the provider's own error, description and status, and say what a
  known misconfiguration means.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from .support.oauth import SECRET, Browser, FakeIdP, FakeRequest, error_of, fake_idp

pytestmark = pytest.mark.e2e

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SERVER_METADATA = "/.well-known/oauth-authorization-server"


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as idp:
        yield idp


def sent_to(fake: FakeIdP, path: str) -> list[FakeRequest]:
    return [r for r in fake.requests if r.path == path]


def signed_in(app: Flask) -> Browser:
    browser = Browser(app.test_client())
    response = browser.sign_in("fake")
    assert response.status_code == 302 and error_of(response) is None, response.headers
    return browser


def auth_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("auth error")]


@pytest.mark.parametrize("method", ["client_secret_jwt", "private_key_jwt"])
def test_jwt_client_authentication_names_the_client_in_the_body(
    fake: FakeIdP, make_oauth_app: Any, tmp_path: Path, method: str
) -> None:
    """RFC 7521 §4.2 allows client_id beside the assertion; Glewlwyd answers a bare 400
    without it, and a mock provider left the ID token's aud out."""
    extra: dict[str, Any] = {"token_endpoint_auth_method": method}
    if method == "private_key_jwt":
        key = RSAKey.generate_key(2048, parameters={"kid": "rp"})
        (tmp_path / "rp.pem").write_bytes(key.as_pem(private=True))
        extra["client_private_key_file"] = str(tmp_path / "rp.pem")
    app = make_oauth_app([fake.provider_config("fake", **extra)])
    signed_in(app)
    [token_request] = sent_to(fake, "/token")
    assert token_request.form["client_id"] == fake.client_id
    assert token_request.form["client_assertion_type"] == ASSERTION_TYPE
    assertion = token_request.form["client_assertion"]
    verify_with = key if method == "private_key_jwt" else OctKey.import_key(SECRET)
    claims = jwt.decode(assertion, verify_with).claims
    assert claims["iss"] == claims["sub"] == fake.client_id
    assert "Authorization" not in token_request.headers


def test_device_authorization_with_http_basic_names_the_client_in_the_body(
    fake: FakeIdP, make_oauth_app: Any
) -> None:
    """RFC 8628 §3.1; django-oauth-toolkit answers 400 "Missing client_id parameter"."""
    fake.discovery["device_authorization_endpoint"] = fake.issuer + "/device_authorization"
    fake.routes["/device_authorization"] = lambda request: (
        200,
        {},
        {
            "device_code": "d" * 32,
            "user_code": "WDJB-MJHT",
            "verification_uri": fake.issuer + "/device",
            "expires_in": 600,
        },
    )
    app = make_oauth_app([fake.provider_config("fake", device_flow=True)])
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    assert client.post("/auth/device/fake", data={"csrfToken": csrf}).status_code == 303
    [request] = sent_to(fake, "/device_authorization")
    assert request.form["client_id"] == fake.client_id
    assert request.headers["Authorization"].startswith("Basic ")


def serve_revocation(fake: FakeIdP, *, in_server_metadata: bool) -> None:
    """A revocation endpoint the OpenID document leaves out; named in the RFC 8414 one, or
    (``in_server_metadata`` False) nowhere: that document is then not there (404)."""
    fake.token_extra["refresh_token"] = "rt-" + "r" * 20
    fake.routes["/revoke"] = lambda request: (200, {}, {})
    if in_server_metadata:
        document = {"issuer": fake.issuer, "revocation_endpoint": fake.issuer + "/revoke"}
        fake.routes[SERVER_METADATA] = lambda request: (200, {}, document)


def revoke_tokens_by_hand(app: Flask, *, confirmed: bool = True) -> str:
    """``flask auth revoke-tokens`` for Fay; it fails (exit 1) unless the provider confirms."""
    result = app.test_cli_runner().invoke(
        args=["auth", "revoke-tokens", "--user", "fay@example.com"]
    )
    assert result.exit_code == (0 if confirmed else 1), result.output
    return str(result.output)


def test_revocation_endpoint_found_in_rfc_8414_metadata_and_both_tokens_revoked(
    fake: FakeIdP, make_oauth_app: Any
) -> None:
    serve_revocation(fake, in_server_metadata=True)
    app = make_oauth_app([fake.provider_config("fake")])
    signed_in(app)
    assert fake.hits[SERVER_METADATA] == 0  # nothing is asked before it is needed
    assert "1 of 1 account(s) revoked" in revoke_tokens_by_hand(app)
    revoked = [(r.form["token"][:3], r.form["token_type_hint"]) for r in sent_to(fake, "/revoke")]
    # The refresh token ends the grant; the access token goes too (Glewlwyd's outlives it).
    assert revoked == [("rt-", "refresh_token"), ("at-", "access_token")]
    assert all(r.headers["Authorization"].startswith("Basic ") for r in sent_to(fake, "/revoke"))
    # The document is kept: a second sign-in and revocation do not ask for it again.
    signed_in(app)
    revoke_tokens_by_hand(app)
    assert fake.hits[SERVER_METADATA] == 1 and fake.hits["/revoke"] == 4


def test_no_revocation_endpoint_anywhere_is_warned_about_and_asked_once(
    fake: FakeIdP, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    serve_revocation(fake, in_server_metadata=False)
    app = make_oauth_app([fake.provider_config("fake")])
    signed_in(app)
    with caplog.at_level(logging.WARNING):
        assert "0 of 1 account(s) revoked" in revoke_tokens_by_hand(app, confirmed=False)
    assert any(
        "fake: no revocation endpoint" in r.getMessage() and r.levelno == logging.WARNING
        for r in caplog.records
    )
    assert fake.hits["/revoke"] == 0
    signed_in(app)
    revoke_tokens_by_hand(app, confirmed=False)
    # A 404 is an answer: the provider has no such document, and is not asked again.
    assert fake.hits[SERVER_METADATA] == 1


def wait_for_line(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """The log records that say ``text``, once there are any (at most 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [r for r in caplog.records if text in r.getMessage()]
        if found:
            return found
        time.sleep(0.02)
    return []


@pytest.mark.parametrize("where", ["nowhere", "server-metadata"])
def test_revoke_on_signout_without_an_endpoint_is_warned_about_at_start_up(
    fake: FakeIdP, make_oauth_app: Any, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    serve_revocation(fake, in_server_metadata=where == "server-metadata")
    with caplog.at_level(logging.INFO):
        make_oauth_app([fake.provider_config("fake", revoke_on_signout=True)])
        # Discovery is read in the background: start-up waits for no provider.
        said = wait_for_line(caplog, "fake: revoke_on_signout")
    if where == "nowhere":
        assert len(said) == 1 and "no revocation endpoint" in said[0].getMessage()
        assert said[0].levelno == logging.WARNING
    else:
        assert [(r.levelno, r.getMessage()) for r in said] == [
            (logging.INFO, f"fake: revoke_on_signout: tokens are revoked at {fake.issuer}/revoke")
        ]
        assert fake.hits[SERVER_METADATA] == 1


def test_a_plain_oauth_provider_without_a_revocation_endpoint_is_warned_about_at_once(
    fake: FakeIdP, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    entry = fake.provider_config("fake", type="oauth", revoke_on_signout=True, scope="email")
    del entry["issuer"]
    entry.update(
        authorization_endpoint=fake.issuer + "/authorize",
        token_endpoint=fake.issuer + "/token",
        userinfo_endpoint=fake.issuer + "/userinfo",
    )
    with caplog.at_level(logging.WARNING):
        make_oauth_app([entry])
    [warning] = [r.getMessage() for r in caplog.records if "revoke_on_signout" in r.getMessage()]
    assert "name revocation_endpoint in the provider's table" in warning
    assert fake.hits == {}


@pytest.mark.parametrize(
    ("status", "body", "logged"),
    [
        (
            401,
            {"error": "invalid_client", "error_description": "client authentication failed"},
            "token endpoint: HTTP 401 invalid_client client authentication failed (our client"
            " authentication was refused: check client_id, the secret or key, and"
            " token_endpoint_auth_method",
        ),
        (
            400,
            {"error": "unauthorized_client"},
            "token endpoint: HTTP 400 unauthorized_client (the client at the provider is not"
            " allowed this grant type, or (Glewlwyd) its credentials were refused",
        ),
        (
            500,
            b"<html><body>Internal Server Error</body></html>",
            "token endpoint: HTTP 500 (a failure at the provider: its own log says why)",
        ),
    ],
    ids=["invalid_client", "unauthorized_client", "500-html"],
)
def test_token_endpoint_failures_are_logged_with_the_providers_words(
    fake: FakeIdP,
    make_oauth_app: Any,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: Any,
    logged: str,
) -> None:
    fake.routes["/token"] = lambda request: (status, {}, body)
    app = make_oauth_app([fake.provider_config("fake")])
    with caplog.at_level(logging.WARNING):
        response = Browser(app.test_client()).sign_in("fake")
    # Our configuration at fault is the site's problem (Configuration), not the person's;
    # the provider failing is OAuthCallback.
    assert error_of(response) == ("OAuthCallback" if status == 500 else "Configuration")
    [line] = auth_errors(caplog)
    assert logged in line, line


@pytest.mark.parametrize(
    ("spoil", "logged"),
    [
        (
            "hs256",
            "algorithm 'HS256' not accepted (an ID token signed with the client secret is"
            " refused by design",
        ),
        (
            "no-id-token",
            "no id_token in token response (the client at the provider needs an ID token"
            " signing algorithm, e.g. RS256, and the openid scope)",
        ),
    ],
)
def test_id_token_misconfigurations_are_named_in_the_log(
    fake: FakeIdP, make_oauth_app: Any, caplog: pytest.LogCaptureFixture, spoil: str, logged: str
) -> None:
    """django-oauth-toolkit's Applications sign with HS256, or not at all, unless told
    RS256: both are refused, and the log says what to change."""
    if spoil == "hs256":
        fake.sign_key = OctKey.import_key(SECRET)
        fake.header["alg"] = "HS256"
    else:
        fake.oidc = False
    app = make_oauth_app([fake.provider_config("fake")])
    with caplog.at_level(logging.WARNING):
        response = Browser(app.test_client()).sign_in("fake")
    assert error_of(response) == "Configuration"
    [line] = auth_errors(caplog)
    assert logged in line, line
    if spoil == "hs256":
        assert "set the client's ID token signing algorithm at the provider to RS256" in line
