"""The app against django-oauth-toolkit 3.4.1 (DOT), a real OpenID Provider the suite
starts itself (``dot``: tests/interop/dot_provider.py, the Django project in
tests/interop/django_provider).

Sign-ins go through the app's own routes (Flask test client) and DOT's pages (real HTTP,
with DOT's login page and, for one Application, its consent form). What reached DOT is
read from its request log, its introspection endpoint and its database, never assumed.

What DOT 3.4.1 does not offer is marked so, with the reason, never passed: client
assertions at the token endpoint (client_secret_jwt, private_key_jwt) and back-channel
logout.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from joserfc import jwt
from joserfc.jwk import KeySet

from webapp.storage.db import db
from webapp.storage.models import Account, DeviceRequest, Session, User

from ..support.oauth import APP_ORIGIN, Browser, email_sign_in, error_of, parse_forms, query_of
from ..support.signin import demo_sign_in
from .dot_provider import (
    CLIENT_METHODS,
    CONSENT_CLIENT,
    DEVICE_CLIENT_METHODS,
    DEVICE_GRANT,
    POST_LOGOUT_REDIRECT_URI,
    UNSUPPORTED_METHODS,
    DotProvider,
    sha256,
)
from .rows import account_of, expire_in, rows

pytestmark = pytest.mark.e2e

ERROR_URL = APP_ORIGIN + "/auth/error?error="
DESTINATION = "/account?tab=security"
#: What the app needs to accept DOT's access tokens as bearer tokens: DOT's introspection
#: answer has no token_type, and names the person by ``username`` (the ``sub`` of their ID
#: tokens, with the project's validator), not ``sub``.
DOT_BEARER = {
    "accept_bearer_tokens": True,
    "bearer_token_type": "optional",
    "bearer_subject_claim": "username",
}


# -- helpers ----------------------------------------------------------------------------


def kid_of(token: str) -> str:
    """The kid in a JWT's header (read, not checked)."""
    header = token.split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])


def flow_cookie(provider_id: str, item: str, state: str) -> str:
    """The name of one sign-in flow's cookie (see webapp.browser_state.oauth_checks)."""
    return f"auth.{item}.{provider_id}.{hashlib.sha256(state.encode()).hexdigest()[:16]}"


def signed_in(dot: DotProvider, app: Flask, provider: str, username: str = "alice") -> Browser:
    browser = Browser(app.test_client())
    answer = dot.sign_in(browser, provider, username)
    assert answer.status_code == 302 and error_of(answer) is None, answer.headers.get("Location")
    return browser


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def body(response: Any) -> dict[str, Any]:
    """A JSON answer's object."""
    found = response.json
    assert isinstance(found, dict), response.get_data(as_text=True)
    return found


def unlink(browser: Browser, account_id: int) -> Any:
    return browser.client.post(
        f"/account/api/accounts/{account_id}/unlink", headers={"X-CSRFToken": browser.csrf()}
    )


def token_requests(dot: DotProvider, client_id: str, grant_type: str) -> list[dict[str, Any]]:
    """The token endpoint requests of ``client_id`` with ``grant_type`` so far."""
    return [
        r for r in dot.requests("/token/", grant_type=grant_type) if dot.client_of(r) == client_id
    ]


def assert_authenticated_as(request: dict[str, Any], client_id: str, method: str) -> None:
    """The logged request carried the client authentication ``method`` names, and only it."""
    if method == "client_secret_basic":
        assert request["basic_client_id"] == client_id
        assert "client_secret" not in request["fields"]
    elif method == "client_secret_post":
        assert request["basic_client_id"] is None
        assert request["client_id"] == client_id and "client_secret" in request["fields"]
    else:
        assert method == "none"
        assert request["basic_client_id"] is None and "client_secret" not in request["fields"]
        assert request["client_id"] == client_id


# -- DOT's metadata -----------------------------------------------------------------------


def test_dot_names_revocation_and_introspection_only_in_its_rfc8414_document(
    dot: DotProvider,
) -> None:
    """What the app has to find DOT's endpoints with: its OpenID discovery document names
    no revocation, introspection or device authorization endpoint; its RFC 8414 document,
    served under the issuer (``<issuer>/.well-known/oauth-authorization-server``; the
    RFC 8414 location at the root only if the site mounts DOT's metadata URLs there too,
    which this one, like DOT's tutorial, does not), names the first two, never the third."""
    oidc = dot.discovery()
    assert oidc["issuer"] == dot.issuer
    for name in ("revocation_endpoint", "introspection_endpoint", "device_authorization_endpoint"):
        assert name not in oidc, name
    assert oidc["end_session_endpoint"] == dot.issuer + "/logout/"
    assert oidc["authorization_response_iss_parameter_supported"] is True
    assert set(oidc["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
    }
    assert "backchannel_logout_supported" not in oidc

    rfc8414 = dot.rfc8414_metadata()
    assert rfc8414["issuer"] == dot.issuer
    assert rfc8414["revocation_endpoint"] == dot.issuer + "/revoke_token/"
    assert rfc8414["introspection_endpoint"] == dot.issuer + "/introspect/"
    assert "device_authorization_endpoint" not in rfc8414
    assert DEVICE_GRANT in rfc8414["grant_types_supported"]
    at_root = requests.get(f"{dot.origin}/.well-known/oauth-authorization-server/o", timeout=10)
    assert at_root.status_code == 404


# -- the code flow ------------------------------------------------------------------------

UNSUPPORTED = (
    "django-oauth-toolkit 3.4.1 authenticates clients only with HTTP Basic or client_secret"
    " in the body (no client assertions, RFC 7523)"
)


@pytest.mark.parametrize(
    "client_id",
    [
        *sorted(CLIENT_METHODS),
        *(
            pytest.param(c, marks=pytest.mark.xfail(reason=UNSUPPORTED, strict=True))
            for c in sorted(UNSUPPORTED_METHODS)
        ),
    ],
)
def test_code_flow_with_each_client_auth_method(
    dot: DotProvider, make_oauth_app: Any, client_id: str
) -> None:
    method = {**CLIENT_METHODS, **UNSUPPORTED_METHODS}[client_id]
    app = make_oauth_app([dot.provider_config(client_id)])
    browser = Browser(app.test_client())
    start = browser.start(client_id, callback_url="/after")
    assert start.status_code == 302
    url = start.headers["Location"]
    assert url.startswith(dot.discovery()["authorization_endpoint"] + "?")
    params = query_of(url)
    assert params["client_id"] == client_id and params["response_type"] == "code"
    assert params["redirect_uri"] == f"{APP_ORIGIN}/auth/callback/{client_id}"
    assert params["code_challenge_method"] == "S256" and len(params["code_challenge"]) == 43
    assert len(params["state"]) >= 32 and len(params["nonce"]) >= 32

    before = len(token_requests(dot, client_id, "authorization_code"))
    callback = dot.authorize(browser.idp, url, "alice")
    answer = query_of(callback)
    # RFC 9207: DOT names itself in the answer; the app checks it.
    assert answer["state"] == params["state"] and answer["iss"] == dot.issuer
    done = browser.client.get(callback)
    assert done.status_code == 302 and done.headers["Location"] == APP_ORIGIN + "/after", (
        done.headers["Location"]
    )

    [exchange] = token_requests(dot, client_id, "authorization_code")[before:]
    assert exchange["status"] == 200 and "code_verifier" in exchange["fields"]
    assert_authenticated_as(exchange, client_id, method)
    [user] = rows(app, User)
    [account] = rows(app, Account)
    [session] = rows(app, Session)
    assert (user.email, user.name) == ("alice@example.com", "Alice")
    assert user.email_verified is not None
    assert (account.provider, account.type, account.provider_account_id) == (
        client_id,
        "oidc",
        "alice",
    )
    assert account.user_id == user.id and session.user_id == user.id
    assert account.access_token and account.id_token and account.refresh_token
    assert account.token_type.lower() == "bearer" and account.expires_at is not None
    assert (session.provider, session.provider_sub) == (client_id, "alice")


def test_id_token_is_dots_signed_for_us_with_the_flows_nonce(
    dot: DotProvider, make_oauth_app: Any
) -> None:
    app = make_oauth_app([dot.provider_config("dot-basic")])
    browser = Browser(app.test_client())
    url = browser.start("dot-basic").headers["Location"]
    asked = len(dot.requests("/userinfo/"))
    assert error_of(browser.client.get(dot.authorize(browser.idp, url, "alice"))) is None
    account = account_of(app, "dot-basic")
    id_token = account.id_token
    keys = KeySet.import_key_set(requests.get(dot.discovery()["jwks_uri"], timeout=10).json())
    token = jwt.decode(id_token, keys)
    assert token.header["alg"] == "RS256" and token.header["kid"] == dot.active_kid
    claims = token.claims
    assert claims["iss"] == dot.issuer and claims["aud"] == "dot-basic"
    # The username, not DOT's default (the user's primary key): the project's validator.
    assert claims["sub"] == "alice"
    assert claims["nonce"] == query_of(url)["nonce"]
    assert (claims["email"], claims["email_verified"], claims["name"]) == (
        "alice@example.com",
        True,
        "Alice",
    )
    assert claims["iat"] <= claims["exp"]
    # The app read DOT's userinfo too, which names the same sub.
    assert [r["status"] for r in dot.requests("/userinfo/")[asked:]] == [200]
    userinfo = requests.get(
        dot.discovery()["userinfo_endpoint"], headers=bearer(account.access_token), timeout=10
    )
    assert userinfo.json()["sub"] == "alice"
    [session] = rows(app, Session)
    assert session.provider_sub == "alice" and session.id_token == id_token


def test_pkce_verifier_is_checked_by_dot(dot: DotProvider, make_oauth_app: Any) -> None:
    """A code redeemed with another flow's verifier: DOT refuses it (400), the sign-in
    fails with nothing stored."""
    app = make_oauth_app([dot.provider_config("dot-basic")])
    browser = Browser(app.test_client())
    first = browser.start("dot-basic").headers["Location"]
    second = browser.start("dot-basic").headers["Location"]
    state1, state2 = query_of(first)["state"], query_of(second)["state"]
    other = browser.client.get_cookie(flow_cookie("dot-basic", "pkce", state2))
    assert other is not None
    browser.client.set_cookie(flow_cookie("dot-basic", "pkce", state1), other.value)
    before = len(token_requests(dot, "dot-basic", "authorization_code"))
    assert error_of(browser.client.get(dot.authorize(browser.idp, first))) == "OAuthCallback"
    [refused] = token_requests(dot, "dot-basic", "authorization_code")[before:]
    assert refused["status"] == 400
    assert rows(app, User) == [] and rows(app, Session) == []


def test_consent_form_authorize_and_cancel(dot: DotProvider, make_oauth_app: Any) -> None:
    """The one Application without skip_authorization: DOT shows its consent form."""
    app = make_oauth_app([dot.provider_config(CONSENT_CLIENT)])
    browser = Browser(app.test_client())
    url = browser.start(CONSENT_CLIENT).headers["Location"]
    page = browser.idp.get(url, timeout=10)  # the login page first
    assert [f.id for f in parse_forms(page.text)] == ["login"]
    callback = dot.authorize(browser.idp, url, "bob")
    assert error_of(browser.client.get(callback)) is None
    [user] = rows(app, User)
    assert user.email == "bob@example.com" and user.email_verified is None  # unverified at DOT

    refused = Browser(app.test_client())
    url = refused.start(CONSENT_CLIENT).headers["Location"]
    callback = dot.authorize(refused.idp, url, "carol", allow=False)
    assert query_of(callback).get("error") == "access_denied", callback
    answer = refused.client.get(callback)
    assert error_of(answer) == "AccessDenied"
    assert len(rows(app, User)) == 1


def test_a_rotated_signing_key_is_picked_up(dot: DotProvider, make_oauth_app: Any) -> None:
    """DOT restarted with a new key, the old one kept in its JWKS: the next ID token's kid is
    new to the app, which fetches the keys again (once) and signs the person in."""
    app = make_oauth_app([dot.provider_config("dot-basic")])
    signed_in(dot, app, "dot-basic")
    old_kid = dot.active_kid
    assert kid_of(account_of(app, "dot-basic").id_token) == old_kid
    new_kid = dot.rotate_key()
    assert new_kid != old_kid and set(dot.jwks_kids()) >= {old_kid, new_kid}
    fetches = len(dot.requests("/.well-known/jwks.json"))

    signed_in(dot, app, "dot-basic")

    assert kid_of(account_of(app, "dot-basic").id_token) == new_kid
    assert len(dot.requests("/.well-known/jwks.json")) == fetches + 1
    assert len(rows(app, Session)) == 2


# -- account linking ------------------------------------------------------------------------


def test_the_same_sub_signs_in_the_same_user(dot: DotProvider, make_oauth_app: Any) -> None:
    app = make_oauth_app([dot.provider_config("dot-basic")])
    signed_in(dot, app, "dot-basic", "carol")
    signed_in(dot, app, "dot-basic", "carol")
    [user] = rows(app, User)
    assert user.email is None and user.name == "Carol"  # Carol has no address at DOT
    assert [a.provider_account_id for a in rows(app, Account)] == ["carol"]
    assert [s.user_id for s in rows(app, Session)] == [user.id, user.id]


def test_a_signed_in_user_gets_the_dot_account_linked(
    dot: DotProvider, make_oauth_app: Any
) -> None:
    app = make_oauth_app([dot.provider_config("dot-basic")])
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(dot.sign_in(browser, "dot-basic", "alice")) is None
    [user] = rows(app, User)
    assert user.email == "someone@example.com"
    assert sorted((a.provider, a.user_id) for a in rows(app, Account)) == [
        ("demo", user.id),
        ("dot-basic", user.id),
    ]


def test_a_verified_address_of_another_user_is_not_linked_by_default(
    dot: DotProvider, make_oauth_app: Any, mailbox: Any
) -> None:
    app = make_oauth_app([dot.provider_config("dot-basic")], EMAIL_SERVER=mailbox.url())
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    browser = Browser(app.test_client())
    assert error_of(dot.sign_in(browser, "dot-basic", "alice")) == "OAuthAccountNotLinked"
    assert len(rows(app, User)) == 1
    assert [a.provider for a in rows(app, Account)] == ["email"]


def test_a_verified_address_links_when_allowed(
    dot: DotProvider, make_oauth_app: Any, mailbox: Any
) -> None:
    app = make_oauth_app(
        [dot.provider_config("dot-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    signed_in(dot, app, "dot-basic", "alice")
    [user] = rows(app, User)
    assert sorted(a.provider for a in rows(app, Account)) == ["dot-basic", "email"]
    assert {a.user_id for a in rows(app, Account)} == {user.id}


def test_an_unverified_address_never_links(
    dot: DotProvider, make_oauth_app: Any, mailbox: Any
) -> None:
    """Bob's address is not verified at DOT: even with linking allowed, his DOT identity
    gets a user of its own, not the address owner's."""
    app = make_oauth_app(
        [dot.provider_config("dot-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, "bob@example.com")
    signed_in(dot, app, "dot-basic", "bob")
    owner, claimant = rows(app, User)
    assert owner.email_verified is not None and claimant.email_verified is None
    assert [(a.provider, a.user_id) for a in rows(app, Account)] == [
        ("email", owner.id),
        ("dot-basic", claimant.id),
    ]


# -- tokens: handed out, refreshed ------------------------------------------------------------


def test_the_stored_token_is_handed_out_without_a_refresh(
    dot: DotProvider, make_oauth_app: Any
) -> None:
    from webapp.flows.provider_tokens import provider_access_token

    app = make_oauth_app([dot.provider_config("dot-basic")])
    browser = signed_in(dot, app, "dot-basic")
    before = len(token_requests(dot, "dot-basic", "refresh_token"))
    answer = browser.client.get("/auth/token/dot-basic")
    assert answer.status_code == 200
    handed = body(answer)
    account = account_of(app, "dot-basic")
    assert handed["accessToken"] == account.access_token and handed["tokenType"] == "Bearer"
    assert set(handed["scope"].split()) == {"openid", "email", "profile"}
    expires = datetime.fromisoformat(handed["expiresAt"])
    assert expires > datetime.now(UTC) + timedelta(minutes=50)
    said = dot.introspect(handed["accessToken"])
    assert (said["active"], said["client_id"], said["username"]) == (True, "dot-basic", "alice")
    with app.test_request_context():
        assert provider_access_token(account.user_id, "dot-basic") == account.access_token
    assert len(token_requests(dot, "dot-basic", "refresh_token")) == before


@pytest.mark.parametrize("client_id", sorted(CLIENT_METHODS))
def test_a_due_token_is_refreshed_and_the_rotated_refresh_token_kept(
    dot: DotProvider, make_oauth_app: Any, client_id: str
) -> None:
    app = make_oauth_app([dot.provider_config(client_id)])
    browser = signed_in(dot, app, client_id)
    old = account_of(app, client_id)
    expire_in(app, client_id, 30)  # within the 60 s margin
    before = len(token_requests(dot, client_id, "refresh_token"))

    answer = browser.client.get(f"/auth/token/{client_id}")

    assert answer.status_code == 200, answer.get_data(as_text=True)
    [refresh] = token_requests(dot, client_id, "refresh_token")[before:]
    assert refresh["status"] == 200 and refresh["refresh_token_sha256"] == sha256(old.refresh_token)
    assert_authenticated_as(refresh, client_id, CLIENT_METHODS[client_id])
    new = account_of(app, client_id)
    assert body(answer)["accessToken"] == new.access_token != old.access_token
    assert new.refresh_token and new.refresh_token != old.refresh_token
    assert new.expires_at > datetime.now(UTC) + timedelta(minutes=50)
    # DOT rotated the refresh token: the old one is revoked there, its access token gone.
    assert dot.refresh_token_live(old.refresh_token) is False
    assert dot.refresh_token_live(new.refresh_token) is True
    assert dot.introspect(old.access_token)["active"] is False
    assert dot.introspect(new.access_token)["active"] is True
    # Fresh now: asked again, nothing more reaches DOT.
    again = browser.client.get(f"/auth/token/{client_id}")
    assert body(again)["accessToken"] == new.access_token
    assert len(token_requests(dot, client_id, "refresh_token")) == before + 1


# -- revocation on unlink -------------------------------------------------------------------


def alice_with_two_accounts(
    dot: DotProvider, make_oauth_app: Any, **basic: Any
) -> tuple[Flask, Browser]:
    """Alice signed in with dot-basic, then dot-post linked (both recent): either may go."""
    app = make_oauth_app(
        [dot.provider_config("dot-basic", **basic), dot.provider_config("dot-post")]
    )
    browser = signed_in(dot, app, "dot-basic")
    assert error_of(dot.sign_in(browser, "dot-post", "alice")) is None
    return app, browser


def test_unlink_revokes_at_dot_found_through_its_rfc8414_metadata(
    dot: DotProvider, make_oauth_app: Any
) -> None:
    """The provider table names the issuer alone: DOT's OpenID discovery names no
    revocation endpoint, so the app finds it in DOT's RFC 8414 document."""
    app, browser = alice_with_two_accounts(dot, make_oauth_app)
    account = account_of(app, "dot-basic")
    assert dot.refresh_token_live(account.refresh_token) is True
    before = len(dot.requests("/revoke_token/"))

    answer = unlink(browser, account.id)

    assert answer.status_code == 200, answer.get_data(as_text=True)
    sent = dot.requests("/revoke_token/")[before:]
    assert sent, "nothing reached DOT's revocation endpoint"
    assert all((r["basic_client_id"], r["status"]) == ("dot-basic", 200) for r in sent)
    assert dot.refresh_token_live(account.refresh_token) is False
    assert dot.introspect(account.access_token)["active"] is False
    # dot-post's grant is untouched.
    assert dot.introspect(account_of(app, "dot-post").access_token)["active"] is True


def test_unlink_revokes_at_the_named_revocation_endpoint(
    dot: DotProvider, make_oauth_app: Any
) -> None:
    app, browser = alice_with_two_accounts(
        dot, make_oauth_app, revocation_endpoint=dot.endpoint("revocation_endpoint")
    )
    account = account_of(app, "dot-basic")
    before = len(dot.requests("/revoke_token/"))

    assert unlink(browser, account.id).status_code == 200

    sent = dot.requests("/revoke_token/")[before:]
    assert sent and all(r["status"] == 200 for r in sent)
    assert all(r["basic_client_id"] == "dot-basic" for r in sent)
    assert dot.refresh_token_live(account.refresh_token) is False
    assert dot.introspect(account.access_token)["active"] is False
    assert dot.introspect(account_of(app, "dot-post").access_token)["active"] is True


def test_unlink_revokes_the_access_token_too(dot: DotProvider, make_oauth_app: Any) -> None:
    """Both tokens are sent to DOT's revocation endpoint (DOT happens to delete a refresh
    token's access token with it, but a provider need not)."""
    app, browser = alice_with_two_accounts(
        dot, make_oauth_app, revocation_endpoint=dot.endpoint("revocation_endpoint")
    )
    account = account_of(app, "dot-basic")
    before = len(dot.requests("/revoke_token/"))

    assert unlink(browser, account.id).status_code == 200

    sent = {r["token_sha256"]: r for r in dot.requests("/revoke_token/")[before:]}
    assert set(sent) == {sha256(account.refresh_token), sha256(account.access_token)}
    assert sent[sha256(account.refresh_token)]["token_type_hint"] == "refresh_token"
    assert sent[sha256(account.access_token)]["token_type_hint"] == "access_token"
    assert dot.access_token_exists(account.access_token) is False


# -- bearer tokens ----------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["discovered", "named"])
def test_a_dot_access_token_signs_an_api_request_in(
    dot: DotProvider, make_oauth_app: Any, endpoint: str
) -> None:
    """With the issuer alone, the introspection endpoint comes from DOT's RFC 8414
    document; or it is named in the provider table."""
    named = {"introspection_endpoint": dot.endpoint("introspection_endpoint")}
    entry = dot.provider_config("dot-basic", **DOT_BEARER, **(named if endpoint == "named" else {}))
    app = make_oauth_app([entry], AUTH_BEARER_CACHE_TTL="0")
    browser = signed_in(dot, app, "dot-basic")
    token = body(browser.client.get("/auth/token/dot-basic"))["accessToken"]
    api = app.test_client()

    answer = api.get("/auth/session", headers=bearer(token))

    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert body(answer)["user"]["email"] == "alice@example.com"
    [asked] = dot.requests("/introspect/", token_sha256=sha256(token))
    assert (asked["basic_client_id"], asked["status"]) == ("dot-basic", 200)
    # Revoked at DOT: refused at once (no cache here).
    dot.revoke(token, "access_token")
    refused = api.get("/auth/session", headers=bearer(token))
    assert refused.status_code == 401 and body(refused)["error"] == "invalid_token"


def test_a_refresh_token_is_not_a_bearer_token(dot: DotProvider, make_oauth_app: Any) -> None:
    """DOT introspects a refresh token as inactive: refused."""
    app = make_oauth_app(
        [
            dot.provider_config(
                "dot-basic",
                introspection_endpoint=dot.endpoint("introspection_endpoint"),
                **DOT_BEARER,
            )
        ]
    )
    signed_in(dot, app, "dot-basic")
    refresh = account_of(app, "dot-basic").refresh_token
    assert dot.refresh_token_live(refresh) is True
    assert dot.introspect(refresh) == {"active": False}
    answer = app.test_client().get("/auth/session", headers=bearer(refresh))
    assert answer.status_code == 401 and body(answer)["error"] == "invalid_token"


def test_without_the_dot_settings_its_tokens_are_refused(
    dot: DotProvider, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """By default an introspection answer needs token_type Bearer and a sub; DOT's has
    neither, so its tokens are refused (401) though DOT says they are active."""
    app = make_oauth_app(
        [
            dot.provider_config(
                "dot-basic",
                introspection_endpoint=dot.endpoint("introspection_endpoint"),
                accept_bearer_tokens=True,
            )
        ]
    )
    browser = signed_in(dot, app, "dot-basic")
    token = body(browser.client.get("/auth/token/dot-basic"))["accessToken"]
    said = dot.introspect(token)
    assert said["active"] is True and "token_type" not in said and "sub" not in said
    answer = app.test_client().get("/auth/session", headers=bearer(token))
    assert answer.status_code == 401 and body(answer)["error"] == "invalid_token"
    assert len(dot.requests("/introspect/", token_sha256=sha256(token))) == 2


# -- logout -----------------------------------------------------------------------------------


def test_rp_initiated_logout_round_trip(dot: DotProvider, make_oauth_app: Any) -> None:
    app = make_oauth_app([dot.provider_config("dot-basic", logout="rp-initiated")])
    browser = signed_in(dot, app, "dot-basic")
    account = account_of(app, "dot-basic")
    [session] = rows(app, Session)
    assert dot.logged_in(browser.idp)

    answer = browser.client.post(
        "/auth/signout", data={"csrfToken": browser.csrf(), "callbackUrl": DESTINATION}
    )

    assert rows(app, Session) == []  # signed out here before the browser goes anywhere
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(dot.discovery()["end_session_endpoint"] + "?")
    params = query_of(location)
    assert params["id_token_hint"] == session.id_token
    assert params["client_id"] == "dot-basic"
    assert params["post_logout_redirect_uri"] == POST_LOGOUT_REDIRECT_URI

    back = dot.end_session(browser.idp, location)

    assert back.startswith(POST_LOGOUT_REDIRECT_URI + "?")
    assert query_of(back) == {"state": params["state"]}
    landed = browser.client.get(back)
    assert landed.status_code == 302 and landed.headers["Location"] == APP_ORIGIN + DESTINATION
    # DOT ended its session and (OIDC_RP_INITIATED_LOGOUT_DELETE_TOKENS) Alice's tokens.
    assert not dot.logged_in(browser.idp)
    assert dot.introspect(account.access_token)["active"] is False


def test_backchannel_logout(dot: DotProvider) -> None:
    assert "backchannel_logout_supported" not in dot.discovery()
    pytest.skip(
        "django-oauth-toolkit 3.4.1 has no OpenID Connect Back-Channel Logout: "
        "no backchannel_logout_uri on an Application, no logout tokens"
    )


# -- sign-in with a code (device authorization grant) ---------------------------------------


def device_app(dot: DotProvider, make_oauth_app: Any, client_id: str, **extra: Any) -> Flask:
    """An app offering sign-in with a code through ``client_id``: the device authorization
    endpoint named (DOT's metadata names none; see the first test)."""
    entry = dot.provider_config(
        client_id,
        device_flow=True,
        device_authorization_endpoint=dot.issuer + "/device-authorization/",
        **extra,
    )
    app: Flask = make_oauth_app([entry])
    return app


def make_due(app: Flask) -> None:
    """Make the device request's next poll due now (stands in for waiting the interval)."""
    assert len(rows(app, DeviceRequest)) == 1
    with app.app_context():
        due = datetime.now(UTC) - timedelta(milliseconds=1)
        db.session.execute(sa.update(DeviceRequest).values(next_poll_at=due))
        db.session.commit()


def start_device(app: Flask, client_id: str) -> tuple[Any, str]:
    """POST the device form; follow to the code page; return the client and user code."""
    client = app.test_client()
    csrf = body(client.get("/auth/csrf"))["csrfToken"]
    started = client.post(
        f"/auth/device/{client_id}", data={"csrfToken": csrf, "callbackUrl": "/account"}
    )
    assert started.status_code == 303, started.headers.get("Location")
    [row] = rows(app, DeviceRequest)
    return client, row.user_code


@pytest.mark.parametrize("client_id", sorted(DEVICE_CLIENT_METHODS))
def test_device_sign_in(dot: DotProvider, make_oauth_app: Any, client_id: str) -> None:
    """DOT's device grant answers with an access token and no ID token: the person is
    who DOT's userinfo names (``sub``, the username)."""
    app = device_app(dot, make_oauth_app, client_id)
    before = len(dot.requests("/device-authorization/"))
    client, user_code = start_device(app, client_id)
    [asked] = dot.requests("/device-authorization/")[before:]
    assert asked["status"] == 200 and asked["client_id"] == client_id
    assert_authenticated_as(asked, client_id, DEVICE_CLIENT_METHODS[client_id])

    assert dot.approve_device(user_code, "alice") == "Authorized"
    make_due(app)
    done = client.get(f"/auth/device/{client_id}/status")

    assert done.status_code == 302 and done.headers["Location"] == APP_ORIGIN + "/account", (
        done.headers.get("Location")
    )
    [poll] = token_requests(dot, client_id, DEVICE_GRANT)[-1:]
    assert poll["status"] == 200
    assert_authenticated_as(poll, client_id, DEVICE_CLIENT_METHODS[client_id])
    assert body(client.get("/auth/session"))["user"]["email"] == "alice@example.com"
    [account] = rows(app, Account)
    assert (account.provider, account.provider_account_id) == (client_id, "alice")
    assert account.access_token and account.refresh_token and account.id_token is None
    assert dot.introspect(account.access_token)["username"] == "alice"
    [session] = rows(app, Session)
    assert (session.user_id, session.provider, session.id_token) == (
        account.user_id,
        client_id,
        None,
    )
    assert rows(app, DeviceRequest) == []


def test_device_denied_is_access_denied(dot: DotProvider, make_oauth_app: Any) -> None:
    app = device_app(dot, make_oauth_app, "dot-device-public")
    client, user_code = start_device(app, "dot-device-public")
    assert dot.approve_device(user_code, "alice", approve=False) == "Denied"
    make_due(app)
    answer = client.get("/auth/device/dot-device-public/status")
    assert answer.status_code == 302 and answer.headers["Location"] == ERROR_URL + "AccessDenied"
    assert rows(app, DeviceRequest) == [] and rows(app, Session) == []


def test_device_sign_in_needs_the_endpoint_named(dot: DotProvider, make_oauth_app: Any) -> None:
    """Neither of DOT's metadata documents names its device authorization endpoint: with
    the issuer alone, sign-in with a code fails at once, before DOT is asked."""
    app = make_oauth_app([dot.provider_config("dot-device-public", device_flow=True)])
    before = len(dot.requests("/device-authorization/"))
    client = app.test_client()
    csrf = body(client.get("/auth/csrf"))["csrfToken"]
    answer = client.post("/auth/device/dot-device-public", data={"csrfToken": csrf})
    assert answer.status_code == 302 and answer.headers["Location"] == ERROR_URL + "OAuthSignin"
    assert len(dot.requests("/device-authorization/")) == before
    assert rows(app, DeviceRequest) == []
