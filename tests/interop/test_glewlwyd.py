"""The app against Glewlwyd 2.7.5 (Debian bookworm's package), a real OpenID Provider the
suite starts on loopback (the ``glewlwyd`` fixture, tests/interop/glewlwyd_provider.py).

Sign-ins go through the app's own routes (Flask test client) and Glewlwyd's REST login
(``GlewlwydBrowser``); what Glewlwyd thinks of a token is asked of it (``introspect``).
Covered: the code flow with state, PKCE and nonce for each client authentication method
Glewlwyd offers; the ID token's claims and a signing key rotated while it runs; account
linking; the token hand-out, its refresh (rotating refresh tokens) and revocation (on
unlink, and ``flask auth revoke-tokens``); bearer tokens by introspection and as RFC 9068
JWTs; RP-initiated logout; back-channel logout to the app served over real HTTP; device
sign-in. What Glewlwyd does not do is marked xfail with the reason, never passed.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask

from webapp.storage.db import db
from webapp.storage.models import Account, DeviceRequest, Session, User

from ..support.databases import migrate_database
from ..support.oauth import APP_ORIGIN, email_sign_in, error_of, query_of, write_providers_toml
from ..support.servers import run_server
from .glewlwyd_provider import (
    API_RESOURCE,
    CLIENT_METHODS,
    DEVICE_CLIENT_METHODS,
    POST_LOGOUT_REDIRECT_URI,
    Glewlwyd,
    GlewlwydBrowser,
    jwt_claims,
    jwt_header,
)
from .rows import account_of, expire_in, rows

pytestmark = pytest.mark.e2e

DESTINATION = "/account?tab=security"
#: Why two tests are xfail: what Glewlwyd does not do.
BARE_400_REFRESH = (
    "Glewlwyd 2.7.5 answers a revoked or spent refresh token with a bare 400, no "
    "error=invalid_grant (RFC 6749 §5.2), so the app cannot tell a dead grant from a "
    "provider failure: it answers 503 and keeps the tokens"
)
PUBLIC_REVOKE = (
    "Glewlwyd 2.7.5's revocation endpoint takes client credentials only (HTTP Basic, POST "
    "or a client assertion): a public client's revocation (client_id alone, RFC 7009 §2.1) "
    "is answered 401"
)


def signed_in(
    app: Flask, glewlwyd: Glewlwyd, provider: str, username: str = "alice"
) -> GlewlwydBrowser:
    """Sign ``username`` in through ``provider`` in a fresh browser; return the browser."""
    browser = GlewlwydBrowser(app.test_client(), glewlwyd, username)
    answer = browser.sign_in(provider, callback_url="/after")
    assert answer.status_code == 302, answer.status_code
    assert error_of(answer) is None, answer.headers["Location"]
    return browser


def csrf_headers(browser: GlewlwydBrowser) -> dict[str, str]:
    return {"X-CSRFToken": browser.csrf()}


# -- the provider as configured ----------------------------------------------------------


def test_glewlwyd_offers_what_the_app_uses(glewlwyd: Glewlwyd) -> None:
    doc = glewlwyd.discovery()
    assert doc["issuer"] == glewlwyd.issuer
    assert set(CLIENT_METHODS.values()) - {"none"} <= set(
        doc["token_endpoint_auth_methods_supported"]
    )
    assert doc["code_challenge_methods_supported"] == ["S256"]
    for endpoint in (
        "end_session_endpoint",
        "revocation_endpoint",
        "introspection_endpoint",
        "device_authorization_endpoint",
    ):
        assert doc[endpoint].startswith(glewlwyd.issuer + "/"), endpoint
    keys = glewlwyd.jwks()["keys"]
    assert glewlwyd.kid in [k["kid"] for k in keys]
    assert all("d" not in k for k in keys)  # public parts only


# -- the code flow, each client authentication method ------------------------------------


@pytest.mark.parametrize("client_id", sorted(CLIENT_METHODS))
def test_every_client_auth_method_signs_in(
    glewlwyd: Glewlwyd, make_oauth_app: Any, client_id: str
) -> None:
    app = make_oauth_app([glewlwyd.provider_config(client_id)])
    browser = GlewlwydBrowser(app.test_client(), glewlwyd)
    start = browser.start(client_id, callback_url="/after")
    assert start.status_code == 302
    request = query_of(start.headers["Location"])
    assert start.headers["Location"].startswith(glewlwyd.discovery()["authorization_endpoint"])
    assert request["client_id"] == client_id and request["response_type"] == "code"
    assert request["code_challenge_method"] == "S256" and len(request["code_challenge"]) == 43
    assert len(request["state"]) >= 32 and len(request["nonce"]) >= 32
    callback = browser.authorize(start.headers["Location"])
    answer = query_of(callback)
    # RFC 9207: Glewlwyd names itself in the answer (oauth-as-iss-id), and the state comes back.
    assert (answer["iss"], answer["state"]) == (glewlwyd.issuer, request["state"])

    done = browser.client.get(callback)

    assert error_of(done) is None, done.headers.get("Location")
    assert done.headers["Location"] == APP_ORIGIN + "/after"
    [user] = rows(app, User)
    [account] = rows(app, Account)
    [session] = rows(app, Session)
    assert (user.email, user.name) == ("alice@example.com", "Alice")
    assert user.email_verified is not None
    assert (account.provider, account.type, account.user_id) == (client_id, "oidc", user.id)
    assert session.user_id == user.id and session.provider == client_id
    assert account.access_token and account.refresh_token and account.id_token
    assert account.token_type.lower() == "bearer" and account.expires_at is not None
    claims = jwt_claims(account.id_token)
    assert claims["nonce"] == request["nonce"] and claims["aud"] == client_id
    assert account.provider_account_id == claims["sub"]


def flow_cookie(provider_id: str, item: str, state: str) -> str:
    """The name of one sign-in flow's cookie (see webapp.browser_state.oauth_checks)."""
    return f"auth.{item}.{provider_id}.{hashlib.sha256(state.encode()).hexdigest()[:16]}"


def test_pkce_verifier_is_checked_by_glewlwyd(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    """A code redeemed with another flow's verifier is refused at Glewlwyd's token endpoint."""
    app = make_oauth_app([glewlwyd.provider_config("gl-basic")])
    browser = GlewlwydBrowser(app.test_client(), glewlwyd)
    first = browser.start("gl-basic").headers["Location"]
    second = browser.start("gl-basic").headers["Location"]
    state1, state2 = query_of(first)["state"], query_of(second)["state"]
    other = browser.client.get_cookie(flow_cookie("gl-basic", "pkce", state2))
    assert other is not None
    browser.client.set_cookie(flow_cookie("gl-basic", "pkce", state1), other.value)
    assert error_of(browser.client.get(browser.authorize(first))) == "OAuthCallback"
    assert rows(app, User) == [] and rows(app, Session) == []


def test_id_token_claims_and_what_the_session_keeps(
    glewlwyd: Glewlwyd, make_oauth_app: Any
) -> None:
    app = make_oauth_app([glewlwyd.provider_config("gl-basic")])
    signed_in(app, glewlwyd, "gl-basic")
    account = account_of(app, "gl-basic")
    [session] = rows(app, Session)
    header, claims = jwt_header(account.id_token), jwt_claims(account.id_token)
    assert (header["alg"], header["kid"]) == ("RS256", glewlwyd.kid)
    assert (claims["iss"], claims["aud"], claims["azp"]) == (
        glewlwyd.issuer,
        "gl-basic",
        "gl-basic",
    )
    assert (claims["email"], claims["email_verified"], claims["name"]) == (
        "alice@example.com",
        True,
        "Alice",
    )
    assert claims["exp"] > claims["iat"] >= time.time() - 60
    assert claims["sid"] and claims["amr"] == ["password"]
    assert (session.provider_sub, session.provider_sid) == (claims["sub"], claims["sid"])
    # The access token is an RFC 9068 JWT too, for the same person.
    access = jwt_claims(account.access_token)
    assert jwt_header(account.access_token)["typ"] == "at+jwt"
    assert (access["sub"], access["client_id"]) == (claims["sub"], "gl-basic")


def test_a_rotated_signing_key_is_picked_up(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    app = make_oauth_app([glewlwyd.provider_config("gl-basic")])
    signed_in(app, glewlwyd, "gl-basic")
    before = jwt_header(account_of(app, "gl-basic").id_token)["kid"]
    new_kid = glewlwyd.rotate_key()
    assert new_kid != before
    published = [k["kid"] for k in glewlwyd.jwks()["keys"]]
    assert new_kid in published and before in published  # the old key is still published
    # The same app (its JWKS cached without the new key) signs alice in again.
    signed_in(app, glewlwyd, "gl-basic")
    assert jwt_header(account_of(app, "gl-basic").id_token)["kid"] == new_kid
    assert len(rows(app, Session)) == 2 and len(rows(app, User)) == 1


# -- account linking ---------------------------------------------------------------------


def test_the_same_subject_signs_in_the_same_user(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    app = make_oauth_app([glewlwyd.provider_config("gl-basic")])
    signed_in(app, glewlwyd, "gl-basic")
    signed_in(app, glewlwyd, "gl-basic")
    [user] = rows(app, User)
    [account] = rows(app, Account)
    assert [s.user_id for s in rows(app, Session)] == [user.id, user.id]
    assert account.user_id == user.id
    # bob is someone else at Glewlwyd: another subject, another user.
    signed_in(app, glewlwyd, "gl-basic", "bob")
    assert (
        len(rows(app, User)) == 2 and len({a.provider_account_id for a in rows(app, Account)}) == 2
    )


def test_an_unverified_address_does_not_join_its_owner(
    glewlwyd: Glewlwyd, make_oauth_app: Any, mailbox: Any
) -> None:
    """bob's address is not verified at Glewlwyd (email_verified false): even with linking
    by address allowed, his sign-in makes a user of its own, and is not refused."""
    app = make_oauth_app(
        [glewlwyd.provider_config("gl-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, "bob@example.com")
    signed_in(app, glewlwyd, "gl-basic", "bob")
    owner, claimant = rows(app, User)
    assert owner.email_verified is not None and claimant.email_verified is None
    assert [(a.provider, a.user_id) for a in rows(app, Account)] == [
        ("email", owner.id),
        ("gl-basic", claimant.id),
    ]


@pytest.mark.parametrize("allowed", [False, True])
def test_a_verified_address_joins_its_owner_only_when_allowed(
    glewlwyd: Glewlwyd, make_oauth_app: Any, mailbox: Any, allowed: bool
) -> None:
    entry = glewlwyd.provider_config("gl-basic", allow_dangerous_email_account_linking=allowed)
    app = make_oauth_app([entry], EMAIL_SERVER=mailbox.url())
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    browser = GlewlwydBrowser(app.test_client(), glewlwyd)
    answer = browser.sign_in("gl-basic")
    [user] = rows(app, User)
    if allowed:
        assert error_of(answer) is None
        assert {a.user_id for a in rows(app, Account)} == {user.id}
    else:
        assert error_of(answer) == "OAuthAccountNotLinked"
        assert [a.provider for a in rows(app, Account)] == ["email"]


# -- tokens: handed out, refreshed, revoked ----------------------------------------------


@pytest.mark.parametrize("client_id", sorted(CLIENT_METHODS))
def test_token_hand_out_and_rotating_refresh(
    glewlwyd: Glewlwyd, make_oauth_app: Any, client_id: str
) -> None:
    app = make_oauth_app([glewlwyd.provider_config(client_id)])
    browser = signed_in(app, glewlwyd, client_id)
    old = account_of(app, client_id)

    handed = browser.client.get(f"/auth/token/{client_id}")
    assert handed.status_code == 200, handed.json
    assert handed.json["accessToken"] == old.access_token
    assert handed.json["tokenType"].lower() == "bearer" and "openid" in handed.json["scope"]

    expire_in(app, client_id, 10)
    refreshed = browser.client.get(f"/auth/token/{client_id}")
    assert refreshed.status_code == 200, refreshed.json
    new = account_of(app, client_id)
    assert refreshed.json["accessToken"] == new.access_token != old.access_token
    assert new.refresh_token and new.refresh_token != old.refresh_token  # rotated
    assert new.expires_at > datetime.now(UTC) + timedelta(minutes=50)
    assert jwt_claims(new.access_token)["sub"] == old.provider_account_id
    if CLIENT_METHODS[client_id] != "none":  # a public client cannot introspect at Glewlwyd
        assert glewlwyd.introspect(old.refresh_token, client_id)["active"] is False
        assert glewlwyd.introspect(new.refresh_token, client_id)["active"] is True
        assert glewlwyd.introspect(new.access_token, client_id)["active"] is True


@pytest.mark.parametrize(
    "client_id",
    [
        pytest.param(c, marks=pytest.mark.xfail(reason=PUBLIC_REVOKE, strict=True))
        if m == "none"
        else c
        for c, m in sorted(CLIENT_METHODS.items())
    ],
)
def test_revoke_tokens_revokes_at_glewlwyd(
    glewlwyd: Glewlwyd, make_oauth_app: Any, client_id: str
) -> None:
    """``flask auth revoke-tokens``, authenticated as each client: both of the account's
    tokens are dead at Glewlwyd afterwards."""
    app = make_oauth_app([glewlwyd.provider_config(client_id)])
    signed_in(app, glewlwyd, client_id)
    before = account_of(app, client_id)
    result = app.test_cli_runner().invoke(
        args=["auth", "revoke-tokens", "--user", "alice@example.com"]
    )
    assert result.exit_code == 0, result.output
    assert "1 of 1 account(s) revoked" in result.output, result.output
    assert glewlwyd.introspect(before.refresh_token, client_id)["active"] is False
    assert glewlwyd.introspect(before.access_token, client_id)["active"] is False


def test_unlink_revokes_both_tokens_at_glewlwyd(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    """Glewlwyd's access tokens are JWTs that live on after their refresh token is revoked:
    unlinking must revoke the access token too."""
    app = make_oauth_app(
        [glewlwyd.provider_config("gl-basic"), glewlwyd.provider_config("gl-post")]
    )
    browser = signed_in(app, glewlwyd, "gl-basic")
    assert error_of(browser.sign_in("gl-post")) is None
    account = account_of(app, "gl-basic")
    other = account_of(app, "gl-post")
    assert glewlwyd.introspect(account.access_token)["active"] is True

    answer = browser.client.post(
        f"/account/api/accounts/{account.id}/unlink", headers=csrf_headers(browser)
    )

    assert answer.status_code == 200, answer.json
    assert glewlwyd.introspect(account.refresh_token, "gl-basic")["active"] is False
    assert glewlwyd.introspect(account.access_token, "gl-basic")["active"] is False
    # The other account's tokens are untouched.
    assert glewlwyd.introspect(other.access_token, "gl-post")["active"] is True
    assert glewlwyd.introspect(other.refresh_token, "gl-post")["active"] is True


@pytest.mark.xfail(reason=BARE_400_REFRESH, strict=True, raises=AssertionError)
def test_a_refresh_token_revoked_at_glewlwyd_ends_the_grant(
    glewlwyd: Glewlwyd, make_oauth_app: Any
) -> None:
    app = make_oauth_app([glewlwyd.provider_config("gl-basic")])
    browser = signed_in(app, glewlwyd, "gl-basic")
    dead = account_of(app, "gl-basic")
    glewlwyd.revoke(dead.refresh_token, "gl-basic")
    expire_in(app, "gl-basic", 10)
    answer = browser.client.get("/auth/token/gl-basic")
    assert answer.status_code == 409, (answer.status_code, answer.json)
    assert answer.json["error"] == "RefreshAccessTokenError"
    cleared = account_of(app, "gl-basic")
    assert (cleared.access_token, cleared.refresh_token) == (None, None)


def test_glewlwyds_refusal_is_logged_with_its_error(
    glewlwyd: Glewlwyd, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A client whose secret is wrong: Glewlwyd answers the code exchange 403
    ``{"error":"unauthorized_client"}``; the sign-in fails, and the log says what Glewlwyd
    said, with its status."""
    entry = glewlwyd.provider_config("gl-basic", client_secret="not-the-secret-" + "x" * 30)
    app = make_oauth_app([entry])
    caplog.set_level(logging.INFO)
    browser = GlewlwydBrowser(app.test_client(), glewlwyd)
    assert error_of(browser.sign_in("gl-basic")) == "Configuration"
    assert rows(app, Account) == []
    said = [r.getMessage() for r in caplog.records if "unauthorized_client" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert any("403" in line for line in said), said
    assert not any("not-the-secret" in r.getMessage() for r in caplog.records)


# -- bearer tokens ----------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_bearer_tokens_by_introspection(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    entry = glewlwyd.provider_config("gl-basic", accept_bearer_tokens=True)
    app = make_oauth_app([entry], AUTH_BEARER_CACHE_TTL="0")
    signed_in(app, glewlwyd, "gl-basic")
    token = account_of(app, "gl-basic").access_token
    api = app.test_client()
    answer = api.get("/auth/session", headers=bearer(token))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.json["user"]["email"] == "alice@example.com"
    exp = glewlwyd.introspect(token)["exp"]
    assert answer.json["expires"].startswith(
        datetime.fromtimestamp(exp, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    )
    assert "Set-Cookie" not in answer.headers
    # Revoked at Glewlwyd: refused at once (no cache).
    glewlwyd.revoke(token, "gl-basic", hint="access_token")
    refused = api.get("/auth/session", headers=bearer(token))
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_bearer_tokens_as_rfc9068_jwts(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    """Glewlwyd's access tokens are RFC 9068 JWTs (typ at+jwt). With the resource named in
    the authorization request (RFC 8707), their aud is that resource; without, Glewlwyd
    puts the scope list there."""
    entry = glewlwyd.provider_config(
        "gl-basic",
        authorization_params={"resource": API_RESOURCE},
        accept_bearer_tokens=True,
        bearer_tokens="jwt",
        bearer_token_audiences=[API_RESOURCE],
    )
    app = make_oauth_app([entry])
    signed_in(app, glewlwyd, "gl-basic")
    account = account_of(app, "gl-basic")
    token = account.access_token
    assert jwt_header(token)["typ"] == "at+jwt"
    assert jwt_claims(token)["aud"] == API_RESOURCE
    api = app.test_client()
    answer = api.get("/auth/session", headers=bearer(token))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.json["user"]["email"] == "alice@example.com"
    # The ID token is signed by the same key but is no access token (typ JWT).
    assert jwt_header(account.id_token)["typ"] != "at+jwt"
    assert api.get("/auth/session", headers=bearer(account.id_token)).status_code == 401
    # An access token for no resource (aud: Glewlwyd's scope list) is not for us.
    other = glewlwyd.code_tokens(requests.Session(), "gl-post")["access_token"]
    assert jwt_claims(other)["aud"] != API_RESOURCE
    assert api.get("/auth/session", headers=bearer(other)).status_code == 401
    # One character of the signature changed.
    head, payload, signature = token.split(".")
    middle = len(signature) // 2
    flipped = "A" if signature[middle] != "A" else "B"
    tampered = ".".join([head, payload, signature[:middle] + flipped + signature[middle + 1 :]])
    assert api.get("/auth/session", headers=bearer(tampered)).status_code == 401


# -- RP-initiated logout --------------------------------------------------------------------


def test_rp_initiated_logout_round_trip(glewlwyd: Glewlwyd, make_oauth_app: Any) -> None:
    entry = glewlwyd.provider_config("gl-basic", logout="rp-initiated")
    app = make_oauth_app([entry])
    browser = signed_in(app, glewlwyd, "gl-basic")
    account = account_of(app, "gl-basic")

    answer = browser.client.post(
        "/auth/signout", data={"csrfToken": browser.csrf(), "callbackUrl": DESTINATION}
    )

    assert rows(app, Session) == []  # signed out here first
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(glewlwyd.discovery()["end_session_endpoint"] + "?")
    params = query_of(location)
    assert params["id_token_hint"] == account.id_token
    assert params["post_logout_redirect_uri"] == POST_LOGOUT_REDIRECT_URI
    back = glewlwyd.end_session(browser.idp, location)
    assert back is not None, "Glewlwyd did not send the browser back"
    assert back.startswith(POST_LOGOUT_REDIRECT_URI + "?")
    assert query_of(back) == {"state": params["state"]}
    landed = browser.client.get(back)
    assert landed.status_code == 302 and landed.headers["Location"] == APP_ORIGIN + DESTINATION
    # Glewlwyd's session is over: the tokens of that session are disabled there.
    assert glewlwyd.introspect(account.access_token)["active"] is False


def test_glewlwyds_stock_client_store_loses_the_post_logout_redirect_uri(
    glewlwyd: Glewlwyd, make_oauth_app: Any
) -> None:
    """The Glewlwyd bug the set-up works around (tests/interop/glewlwyd/seed.json): a client
    registered under the stock data format's name, ``post_logout_redirect_uri``, is never
    sent back after end_session (the plugin reads ``post_logout_redirect_uris``). When this
    fails, Glewlwyd has fixed it and the workaround can go."""
    client_id = f"gl-singular-{uuid.uuid4().hex[:8]}"
    glewlwyd.add_client(
        client_id,
        post_logout_redirect_uris=None,
        post_logout_redirect_uri=POST_LOGOUT_REDIRECT_URI,
    )
    app = make_oauth_app([glewlwyd.provider_config(client_id, logout="rp-initiated")])
    browser = signed_in(app, glewlwyd, client_id)
    answer = browser.client.post("/auth/signout", data={"csrfToken": browser.csrf()})
    assert answer.headers["Location"].startswith(glewlwyd.discovery()["end_session_endpoint"])
    assert glewlwyd.end_session(browser.idp, answer.headers["Location"]) is None


# -- back-channel logout, the app served over HTTP ------------------------------------------


def test_backchannel_logout_ends_the_session(glewlwyd: Glewlwyd, tmp_path: Path) -> None:
    """The app served over real HTTP (the production server, its own SQLite database), two
    people signed in through Glewlwyd; alice's Glewlwyd session ends (its logout page's
    button): Glewlwyd posts a logout token naming her sid, and her session here ends,
    bob's lives on."""
    client_id = f"gl-bcl-{uuid.uuid4().hex[:8]}"
    entry = glewlwyd.provider_config(
        client_id, method="client_secret_basic", backchannel_logout=True
    )
    config = str(write_providers_toml(tmp_path / "auth.toml", [entry]))
    database = tmp_path / "server.sqlite3"
    migrate_database(f"sqlite:///{database}")
    with run_server(tmp_path, database=f"sqlite:///{database}", AUTH_CONFIG=config) as server:
        glewlwyd.add_client(
            client_id,
            auth_url=server.url + "/auth",
            backchannel_logout_uri=f"{server.url}/auth/backchannel-logout/{client_id}",
            backchannel_logout_session_required="true",
        )
        alice_idp = requests.Session()
        alice = server_sign_in(glewlwyd, server.url, client_id, alice_idp, "alice")
        bob = server_sign_in(glewlwyd, server.url, client_id, requests.Session(), "bob")
        with sqlite3.connect(database) as conn:
            found = dict(
                conn.execute(
                    "SELECT u.email, s.provider_sid FROM sessions s JOIN users u"
                    " ON u.id = s.user_id"
                ).fetchall()
            )
        assert set(found) == {"alice@example.com", "bob@example.com"}
        assert all(found.values()) and len(set(found.values())) == 2

        glewlwyd.end_provider_session(alice_idp, found["alice@example.com"])

        deadline = time.monotonic() + 10  # Glewlwyd posts from a thread of its own
        while alice.get(f"{server.url}/auth/session", timeout=10).json() is not None:
            assert time.monotonic() < deadline, "no back-channel logout:\n" + glewlwyd.log()[-3000:]
            time.sleep(0.05)
        assert bob.get(f"{server.url}/auth/session", timeout=10).json()["user"]["name"] == "Bob"
    assert f'"POST /auth/backchannel-logout/{client_id} HTTP/1.1" 200' in (
        server.access_log.read_text()
    )
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM used_logout_tokens").fetchone() == (1,)
        left = conn.execute(
            "SELECT u.email FROM sessions s JOIN users u ON u.id = s.user_id"
        ).fetchall()
    assert left == [("bob@example.com",)]


def server_sign_in(
    glewlwyd: Glewlwyd, url: str, client_id: str, idp: requests.Session, username: str
) -> requests.Session:
    """Sign ``username`` in at the app served at ``url`` (its own cookie jar; Glewlwyd's
    cookies stay in ``idp``); return the app's browser."""
    browser = requests.Session()
    csrf = browser.get(f"{url}/auth/csrf", timeout=10).json()["csrfToken"]
    start = browser.post(
        f"{url}/auth/signin/{client_id}",
        data={"csrfToken": csrf},
        allow_redirects=False,
        timeout=10,
    )
    assert start.status_code == 302, start.text
    callback = glewlwyd.authorize(idp, start.headers["Location"], username, origin=url)
    done = browser.get(callback, allow_redirects=False, timeout=10)
    assert done.status_code == 302 and "error=" not in done.headers["Location"], done.headers
    return browser


# -- device sign-in -----------------------------------------------------------------------


def user_code_of(page: Any) -> str:
    found = re.search(r'<p class="user-code">(.*?)</p>', page.get_data(as_text=True))
    assert found, page.get_data(as_text=True)
    return found[1]


@pytest.mark.parametrize("client_id", sorted(DEVICE_CLIENT_METHODS))
def test_device_sign_in(glewlwyd: Glewlwyd, make_oauth_app: Any, client_id: str) -> None:
    app = make_oauth_app(
        [glewlwyd.provider_config(client_id, name="Glewlwyd TV", device_flow=True)]
    )
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    start = client.post(
        f"/auth/device/{client_id}", data={"csrfToken": csrf, "callbackUrl": "/after"}
    )
    assert start.status_code == 303, start.get_data(as_text=True)
    page = client.get(f"/auth/device/{client_id}/status")
    assert page.status_code == 200
    user_code = user_code_of(page)
    assert f"{glewlwyd.issuer}/device" in page.get_data(as_text=True)

    glewlwyd.approve_device(user_code, "alice")
    with app.app_context():  # stands in for waiting out the interval
        db.session.execute(
            sa.update(DeviceRequest).values(next_poll_at=datetime.now(UTC) - timedelta(seconds=1))
        )
        db.session.commit()
    done = client.get(f"/auth/device/{client_id}/status")

    assert done.status_code == 302, done.get_data(as_text=True)
    assert done.headers["Location"] == APP_ORIGIN + "/after"
    assert client.get("/auth/session").json["user"]["email"] == "alice@example.com"
    [account] = rows(app, Account)
    [session] = rows(app, Session)
    assert (account.provider, session.provider) == (client_id, client_id)
    assert account.access_token and account.refresh_token and account.id_token
    assert set(account.scope.split()) == {"openid", "email", "profile"}
    assert rows(app, DeviceRequest) == []
