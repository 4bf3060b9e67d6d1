"""Provider logout against the real oidc-provider (tests/op/server.mjs, ``node_op``).

1. An OpenID Connect sign-in keeps the provider's ``sid`` and ``sub`` and the ID token,
   sealed; ``active_sessions`` tells whether a provider session is known, never a token.
2. RP-initiated logout: signing out deletes our session first, then sends the browser to
   the provider's end_session_endpoint, which sends it back to ``signout/callback`` with a
   state only this browser's cookie matches. Without it (logout off, provider down, no
   endpoint) the sign-out stays here, and still happens.
3. Back-channel logout for real: two production servers on one database, one provider
   session, one logout token from the provider: both sessions end.
4. Logout tokens the tests sign themselves (``NodeOP.logout_token`` / ``sign``): each
   hostile one is refused (400) with nothing written; valid ones end exactly the sessions
   they name, once.
5. ``provider_signed_out`` after the commit. 6. Migration 0005 down and up with rows in
   place. 7. ``flask auth rotate-secrets`` re-seals ``sessions.id_token``.

Not real, and why: ``FakeIdP`` plays what the real provider never does (a discovery
document without, or with an unusable, end_session_endpoint; a signing key rotated while
it runs); section 4 makes its session rows with ``session_factory`` (what matters there is
which rows a token names, not how they were signed in; sections 1 to 3 sign in for real);
the in-process app has no address the provider could reach, so the clients it signs in to
get a back-channel URI on a closed port (the provider gives a ``sid`` only to clients with
one; its deliveries there fail and nothing depends on them).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from flask_migrate import downgrade, upgrade
from freezegun import freeze_time
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from webapp import MIGRATIONS_DIR, create_app
from webapp.core import sealing
from webapp.core.hooks import provider_signed_out
from webapp.sessions.store import hash_token, new_token
from webapp.storage.db import db
from webapp.storage.models import Account, Session, UsedLogoutToken, User

from .support.config import TEST_SECRET, base_config
from .support.oauth import (
    APP_ORIGIN,
    OP_KID,
    POST_LOGOUT_REDIRECT_URI,
    SECRET,
    Browser,
    FakeIdP,
    NodeOP,
    error_of,
    fake_idp,
    follow_to_app,
    query_of,
    write_providers_toml,
)
from .support.servers import free_port, run_server
from .support.signin import demo_sign_in

pytestmark = pytest.mark.e2e

COOKIE = "auth.session-token"
STATE_COOKIE = "auth.signout-state"
EVENT = "http://schemas.openid.net/event/backchannel-logout"
HOME = APP_ORIGIN + "/"
DESTINATION = "/account?tab=security"
SECRET_B = "rotated-secret-" + "b" * 40
BEFORE_0005 = "0004_sealed_provider_tokens"
VIEW_COLUMNS_0004 = {
    "session_id",
    "user_id",
    "user_email",
    "created_at",
    "last_active_at",
    "expires",
    "ip",
    "user_agent",
    "provider",
}
VIEW_COLUMNS = VIEW_COLUMNS_0004 | {"provider_session_known"}


# -- helpers ----------------------------------------------------------------------------


def logout_client(node_op: NodeOP, prefix: str = "rp") -> str:
    """Register a new client of the provider for the in-process app (APP_ORIGIN); return
    its id, which is also the provider id in the app. Its ID tokens carry a ``sid`` (the
    provider gives one only to clients with a back-channel URI: here a closed port)."""
    client_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    node_op.add_client(client_id, backchannel_logout=f"http://127.0.0.1:{free_port()}/closed")
    return client_id


def sign_in(
    app: Flask, provider: str, *, account: str = "alice", browser: Browser | None = None
) -> Browser:
    """Sign ``account`` in through ``provider`` for real; return the browser."""
    browser = browser or Browser(app.test_client())
    answer = browser.sign_in(provider, login_hint=account)
    assert answer.status_code == 302 and error_of(answer) is None, answer.headers.get("Location")
    return browser


def cookie_of(client: FlaskClient) -> str:
    cookie = client.get_cookie(COOKIE)
    assert cookie is not None, "not signed in"
    return cookie.value


def sign_out(browser: Browser, **form: str) -> Any:
    return browser.client.post("/auth/signout", data={"csrfToken": browser.csrf(), **form})


def session_row(app: Flask, token: str) -> dict[str, Any] | None:
    """The session of a cookie as the database holds it (``id_token`` as stored)."""
    with app.app_context(), db.engine.connect() as conn:
        row = (
            conn.execute(
                sa.text(
                    "SELECT id, user_id, provider, provider_sid, provider_sub, id_token "
                    "FROM sessions WHERE token_hash = :hash"
                ),
                {"hash": hash_token(token)},
            )
            .mappings()
            .first()
        )
    return dict(row) if row is not None else None


def session_id_token(app: Flask, session_id: int) -> str | None:
    """A session's ID token as the application reads it (through SealedText)."""
    with app.app_context():
        session = db.session.get(Session, session_id)
        assert session is not None
        return session.id_token


def count(app: Flask, table: str) -> int:
    with app.app_context(), db.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def prefix_of(app: Flask) -> str:
    with app.app_context():
        return sealing.current_prefix()


def end_session_endpoint(node_op: NodeOP) -> str:
    return str(node_op.discovery()["end_session_endpoint"])


def single_params(url: str) -> dict[str, str]:
    """The query of ``url``, each parameter present exactly once."""
    found = parse_qs(urlsplit(url).query, keep_blank_values=True)
    assert all(len(v) == 1 for v in found.values()), found
    return {k: v[0] for k, v in found.items()}


def silent_authorize(node_op: NodeOP, idp: requests.Session, client_id: str) -> Mapping[str, str]:
    """Ask the provider for a code with ``prompt=none`` in the browser whose provider
    cookies are in ``idp``; return the answer's query: a ``code`` while that browser's
    provider session lives, ``error=login_required`` once it has ended."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    params = {
        "client_id": client_id,
        "response_type": "code",
        "redirect_uri": f"{APP_ORIGIN}/auth/callback/{client_id}",
        "scope": "openid",
        "state": secrets.token_urlsafe(16),
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "prompt": "none",
    }
    url = node_op.discovery()["authorization_endpoint"] + "?" + urlencode(params)
    return query_of(follow_to_app(idp, url))


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeIdP]:
    with fake_idp() as fake:
        yield fake


@pytest.fixture
def fake(fake_server: FakeIdP) -> Iterator[FakeIdP]:
    """The module's FakeIdP (one server: stopping one takes half a second), as new: its
    discovery document and keys restored afterwards, its hits counted from zero."""
    discovery, jwks, key = dict(fake_server.discovery), list(fake_server.jwks), fake_server.sign_key
    fake_server.hits.clear()
    yield fake_server
    fake_server.discovery, fake_server.jwks, fake_server.sign_key = discovery, jwks, key


# -- 1. what a session keeps --------------------------------------------------------------


def test_an_oidc_sign_in_keeps_sid_sub_and_the_id_token_sealed(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    client_id = logout_client(node_op, "keep")
    app = make_oauth_app([node_op.provider_config(client_id), node_op.provider_config("op-basic")])
    alice = session_row(app, cookie_of(sign_in(app, client_id).client))
    assert alice is not None
    id_token = session_id_token(app, alice["id"])
    assert id_token is not None
    with app.app_context():
        account_id_token = db.session.execute(
            sa.select(Account.id_token).where(Account.provider == client_id)
        ).scalar_one()
        prefix = sealing.current_prefix()
    # The sign-in's very ID token, signed by the provider, naming this client and a sid.
    assert id_token == account_id_token
    claims = jwt.decode(id_token, node_op.op_key).claims
    assert (claims["aud"], claims["sub"]) == (client_id, "alice") and claims["sid"]
    assert (alice["provider"], alice["provider_sid"], alice["provider_sub"]) == (
        client_id,
        claims["sid"],
        "alice",
    )
    assert alice["id_token"].startswith(prefix)
    assert alice["id_token"] != id_token and id_token not in alice["id_token"]
    assert claims["sid"] not in alice["id_token"]

    # op-basic has no back-channel URI: no sid, but the sub and the ID token are kept.
    bob = session_row(app, cookie_of(sign_in(app, "op-basic", account="bob").client))
    assert bob is not None
    assert (bob["provider"], bob["provider_sid"], bob["provider_sub"]) == ("op-basic", None, "bob")
    assert bob["id_token"].startswith(prefix)
    bob_token = session_id_token(app, bob["id"])
    assert bob_token is not None and jwt.decode(bob_token, node_op.op_key).claims["sub"] == "bob"

    # Not OpenID Connect: nothing of a provider session.
    demo = app.test_client()
    assert error_of(demo_sign_in(demo)) is None
    ann = session_row(app, cookie_of(demo))
    assert ann is not None
    assert (ann["provider_sid"], ann["provider_sub"], ann["id_token"]) == (None, None, None)

    with app.app_context(), db.engine.connect() as conn:
        result = conn.execute(sa.text("SELECT * FROM active_sessions"))
        columns = set(result.keys())
        rows = {row["session_id"]: row for row in result.mappings()}
        hashes = conn.execute(sa.text("SELECT token_hash FROM sessions")).scalars().all()
    assert columns == VIEW_COLUMNS
    assert {k: bool(r["provider_session_known"]) for k, r in rows.items()} == {
        alice["id"]: True,
        bob["id"]: True,
        ann["id"]: False,
    }
    assert rows[alice["id"]]["provider"] == client_id
    assert rows[bob["id"]]["provider"] == "op-basic"
    cells = [str(value) for row in rows.values() for value in row.values()]
    for secret in (id_token, bob_token, alice["id_token"], *hashes):
        assert not any(secret in cell for cell in cells)


# -- 2. RP-initiated logout ------------------------------------------------------------------


@dataclass
class RP:
    """An app whose provider (a fresh client of the real provider) has RP-initiated logout."""

    app: Flask
    client_id: str


@pytest.fixture
def rp(node_op: NodeOP, make_oauth_app: Callable[..., Flask]) -> RP:
    client_id = logout_client(node_op)
    entry = node_op.provider_config(client_id, logout="rp-initiated", name="Logout OP")
    return RP(make_oauth_app([entry]), client_id)


def test_rp_initiated_logout_round_trip(node_op: NodeOP, rp: RP) -> None:
    browser = sign_in(rp.app, rp.client_id)
    token = cookie_of(browser.client)
    row = session_row(rp.app, token)
    assert row is not None and row["provider_sid"]
    id_token = session_id_token(rp.app, row["id"])
    assert "code" in silent_authorize(node_op, browser.idp, rp.client_id)  # provider session on
    # Without the CSRF token: nothing happens, here or there.
    forged = browser.client.post("/auth/signout", data={"callbackUrl": DESTINATION})
    assert not forged.headers.get("Location", "").startswith(end_session_endpoint(node_op))
    assert session_row(rp.app, token) == row

    answer = sign_out(browser, callbackUrl=DESTINATION)

    # Signed out here before the browser goes anywhere.
    assert session_row(rp.app, token) is None
    assert count(rp.app, "sessions") == 0
    assert browser.client.get("/auth/session").json is None
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(end_session_endpoint(node_op) + "?")
    params = single_params(location)
    assert set(params) == {"id_token_hint", "client_id", "post_logout_redirect_uri", "state"}
    assert params["id_token_hint"] == id_token
    assert params["client_id"] == rp.client_id
    assert params["post_logout_redirect_uri"] == POST_LOGOUT_REDIRECT_URI
    state = params["state"]
    assert len(state) >= 32
    kept = browser.client.get_cookie(STATE_COOKIE)
    assert kept is not None and kept.http_only
    assert state not in kept.value and "account" not in kept.value  # sealed

    back = node_op.end_session(browser.idp, location)

    assert back.startswith(POST_LOGOUT_REDIRECT_URI + "?") and query_of(back) == {"state": state}
    landed = browser.client.get(back)
    assert landed.status_code == 302
    assert landed.headers["Location"] == APP_ORIGIN + DESTINATION
    assert browser.client.get_cookie(STATE_COOKIE) is None
    # The provider's session ended too: no silent sign-in any more.
    assert "op_session" not in browser.idp.cookies
    assert silent_authorize(node_op, browser.idp, rp.client_id).get("error") == "login_required"
    # Coming back a second time (the state cookie is spent) lands on the default page.
    again = browser.client.get(back)
    assert again.status_code == 302 and again.headers["Location"] == HOME


def test_revoke_on_signout_and_provider_logout_together(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    client_id = logout_client(node_op, "both")
    entry = node_op.provider_config(client_id, logout="rp-initiated", revoke_on_signout=True)
    app = make_oauth_app([entry])
    browser = sign_in(app, client_id)
    with app.app_context():
        account = db.session.execute(sa.select(Account)).scalar_one()
        access, refresh = account.access_token, account.refresh_token
    assert access and refresh and node_op.introspect(refresh, "op-cli")["active"] is True

    answer = sign_out(browser, callbackUrl=DESTINATION)

    assert answer.headers["Location"].startswith(end_session_endpoint(node_op) + "?")
    assert node_op.introspect(refresh, "op-cli")["active"] is False
    assert node_op.introspect(access, "op-cli")["active"] is False
    with app.app_context():
        account = db.session.execute(sa.select(Account)).scalar_one()
        assert (account.access_token, account.refresh_token) == (None, None)
    back = node_op.end_session(browser.idp, answer.headers["Location"])
    assert browser.client.get(back).headers["Location"] == APP_ORIGIN + DESTINATION
    assert silent_authorize(node_op, browser.idp, client_id).get("error") == "login_required"


def test_the_callback_needs_this_browsers_state(rp: RP) -> None:
    browsers = [sign_in(rp.app, rp.client_id), sign_in(rp.app, rp.client_id, account="bob")]
    states, cookies = [], []
    for browser in browsers:
        answer = sign_out(browser, callbackUrl=DESTINATION)
        states.append(single_params(answer.headers["Location"])["state"])
        kept = browser.client.get_cookie(STATE_COOKIE)
        assert kept is not None
        cookies.append(kept.value)
    assert count(rp.app, "sessions") == 0
    (state_a, state_b), (cookie_a, cookie_b) = states, cookies
    assert state_a != state_b and cookie_a != cookie_b

    def land(cookie: str | None, state: str | None) -> str:
        client = rp.app.test_client()  # a browser holding ``cookie``, nothing else
        if cookie is not None:
            client.set_cookie(STATE_COOKIE, cookie)
        query = "" if state is None else "?state=" + quote(state, safe="")
        answer = client.get("/auth/signout/callback" + query)
        assert answer.status_code == 302
        return str(answer.headers["Location"])

    def flipped(value: str, at: int) -> str:
        return value[:at] + ("A" if value[at] != "A" else "B") + value[at + 1 :]

    wanted = APP_ORIGIN + DESTINATION
    assert land(cookie_a, state_b) == HOME  # another browser's state
    assert land(cookie_b, state_a) == HOME  # this state in another browser
    assert land(cookie_a, flipped(state_a, len(state_a) // 2)) == HOME
    assert land(cookie_a, state_a + "x") == HOME
    assert land(cookie_a, state_a[:-1]) == HOME
    assert land(cookie_a, "") == HOME
    assert land(cookie_a, None) == HOME
    assert land(None, state_a) == HOME  # no cookie
    assert land(flipped(cookie_a, len(cookie_a) // 2), state_a) == HOME  # tampered cookie
    assert land(cookie_a + cookie_b, state_a) == HOME
    now = datetime.now(UTC)
    with freeze_time(now + timedelta(seconds=905)):  # kept 900 s
        assert land(cookie_a, state_a) == HOME
    with freeze_time(now + timedelta(seconds=880)):
        assert land(cookie_a, state_a) == wanted
    # Each browser's own pair works: the refusals above are the mismatches'.
    assert land(cookie_a, state_a) == wanted
    assert land(cookie_b, state_b) == wanted


@pytest.mark.parametrize(
    "callback_url",
    [
        "//evil.example",
        "https://evil.example/account",
        "/\\evil.example",
        "http://localhost@evil.example/",
    ],
)
def test_an_unsafe_callback_url_never_leaves_the_site(
    node_op: NodeOP, rp: RP, callback_url: str
) -> None:
    browser = sign_in(rp.app, rp.client_id)
    answer = sign_out(browser, callbackUrl=callback_url)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(end_session_endpoint(node_op) + "?")
    assert "evil" not in unquote(location)
    back = node_op.end_session(browser.idp, location)
    landed = browser.client.get(back)
    assert landed.status_code == 302 and landed.headers["Location"] == HOME


@pytest.mark.parametrize("how", ["json field", "header"])
def test_json_mode_answers_the_provider_url(node_op: NodeOP, rp: RP, how: str) -> None:
    browser = sign_in(rp.app, rp.client_id)
    token = cookie_of(browser.client)
    form = {"csrfToken": browser.csrf(), "callbackUrl": DESTINATION}
    headers = {}
    if how == "json field":
        form["json"] = "true"
    else:
        headers["X-Auth-Return-Redirect"] = "1"
    answer = browser.client.post("/auth/signout", data=form, headers=headers)
    assert answer.status_code == 200 and set(answer.json) == {"url"}
    url = answer.json["url"]
    assert url.startswith(end_session_endpoint(node_op) + "?")
    params = single_params(url)
    assert set(params) == {"id_token_hint", "client_id", "post_logout_redirect_uri", "state"}
    assert params["client_id"] == rp.client_id
    assert session_row(rp.app, token) is None
    back = node_op.end_session(browser.idp, url)
    assert browser.client.get(back).headers["Location"] == APP_ORIGIN + DESTINATION


def test_without_provider_logout_the_sign_out_stays_here(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    client_id = logout_client(node_op, "stay")
    app = make_oauth_app([node_op.provider_config(client_id)])
    browser = sign_in(app, client_id)
    answer = sign_out(browser, callbackUrl=DESTINATION)
    assert answer.status_code == 302 and answer.headers["Location"] == APP_ORIGIN + DESTINATION
    assert browser.client.get_cookie(STATE_COOKIE) is None
    assert count(app, "sessions") == 0
    # The provider was not told: its session lives on.
    assert "code" in silent_authorize(node_op, browser.idp, client_id)

    sign_in(app, client_id, browser=browser)
    answer = browser.client.post(
        "/auth/signout",
        data={"csrfToken": browser.csrf(), "callbackUrl": DESTINATION, "json": "true"},
    )
    assert answer.status_code == 200 and answer.json == {"url": APP_ORIGIN + DESTINATION}
    assert count(app, "sessions") == 0


def test_provider_down_at_sign_out_still_signs_out(
    node_op: NodeOP, rp: RP, make_oauth_app: Callable[..., Flask]
) -> None:
    browser = sign_in(rp.app, rp.client_id)
    token = cookie_of(browser.client)
    # The same provider id, its issuer not listening (discovery fails).
    down = f"http://127.0.0.1:{free_port()}"
    broken = make_oauth_app(
        [node_op.provider_config(rp.client_id, logout="rp-initiated", issuer=down)]
    )
    client = broken.test_client()
    client.set_cookie(COOKIE, token)
    csrf = client.get("/auth/csrf").json["csrfToken"]
    answer = client.post("/auth/signout", data={"csrfToken": csrf, "callbackUrl": DESTINATION})
    assert answer.status_code == 302 and answer.headers["Location"] == APP_ORIGIN + DESTINATION
    assert client.get_cookie(STATE_COOKIE) is None
    assert session_row(broken, token) is None
    assert client.get("/auth/session").json is None


def test_provider_without_end_session_endpoint_signs_out_here(
    fake: FakeIdP, make_oauth_app: Callable[..., Flask]
) -> None:
    # FakeIdP: the real provider always has an end_session_endpoint
    assert "end_session_endpoint" not in fake.discovery
    app = make_oauth_app([fake.provider_config(logout="rp-initiated")])
    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("fake")) is None
    token = cookie_of(browser.client)
    answer = sign_out(browser, callbackUrl=DESTINATION)
    assert answer.status_code == 302 and answer.headers["Location"] == APP_ORIGIN + DESTINATION
    assert browser.client.get_cookie(STATE_COOKIE) is None
    assert session_row(app, token) is None


@pytest.mark.parametrize(
    "advertised",
    [
        "https://op.example/logout?tenant=t1",
        "javascript:alert(1)",
        "http://op.example/logout",  # plain HTTP off loopback
        42,
        ["https://op.example/logout"],
        {"url": "https://op.example/logout"},
    ],
    ids=["https with a query", "javascript", "insecure", "number", "list", "object"],
)
def test_the_discovered_end_session_endpoint_is_used_only_when_usable(
    fake: FakeIdP, make_oauth_app: Callable[..., Flask], advertised: Any
) -> None:
    """Whatever the provider's discovery document says, signing out signs out here."""
    # FakeIdP: the real provider's discovery document is always right
    fake.discovery["end_session_endpoint"] = advertised
    app = make_oauth_app([fake.provider_config(logout="rp-initiated")])
    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("fake")) is None
    token = cookie_of(browser.client)
    answer = sign_out(browser, callbackUrl=DESTINATION)
    assert answer.status_code == 302, answer.status_code
    assert session_row(app, token) is None
    if advertised == "https://op.example/logout?tenant=t1":
        location = answer.headers["Location"]
        assert location.startswith("https://op.example/logout?")
        params = single_params(location)
        assert params.pop("tenant") == "t1"
        assert set(params) == {
            "id_token_hint",
            "client_id",
            "post_logout_redirect_uri",
            "state",
        }
        assert params["client_id"] == fake.client_id
    else:
        assert answer.headers["Location"] == APP_ORIGIN + DESTINATION
        assert browser.client.get_cookie(STATE_COOKIE) is None


def test_a_session_of_a_provider_no_longer_configured_signs_out_here(
    node_op: NodeOP, rp: RP, make_oauth_app: Callable[..., Flask]
) -> None:
    browser = sign_in(rp.app, rp.client_id)
    token = cookie_of(browser.client)
    without = make_oauth_app([node_op.provider_config("op-basic", logout="rp-initiated")])
    client = without.test_client()
    client.set_cookie(COOKIE, token)
    csrf = client.get("/auth/csrf").json["csrfToken"]
    answer = client.post("/auth/signout", data={"csrfToken": csrf, "callbackUrl": DESTINATION})
    assert answer.status_code == 302 and answer.headers["Location"] == APP_ORIGIN + DESTINATION
    assert session_row(without, token) is None


def test_the_sign_out_page_says_when_the_provider_signs_out_too(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    client_id = logout_client(node_op, "page")
    app = make_oauth_app(
        [
            node_op.provider_config(client_id, logout="rp-initiated", name="Logout OP"),
            node_op.provider_config("op-basic", name="Plain OP"),
        ]
    )
    told = "This also signs you out of"

    def page(client: FlaskClient) -> str:
        answer = client.get("/auth/signout")
        assert answer.status_code == 200
        return answer.get_data(as_text=True)

    with_logout = page(sign_in(app, client_id).client)
    assert f"{told} Logout OP" in with_logout and "alice@example.com" in with_logout
    without = page(sign_in(app, "op-basic", account="bob").client)
    assert "bob@example.com" in without and told not in without
    demo = app.test_client()
    assert error_of(demo_sign_in(demo)) is None
    assert told not in page(demo)
    signed_out = page(app.test_client())
    assert "You are not signed in." in signed_out and told not in signed_out


# -- 3. back-channel logout, for real ---------------------------------------------------------


def server_sign_in(
    url: str, client_id: str, idp: requests.Session, account: str = "alice"
) -> requests.Session:
    """Sign ``account`` in at the app served at ``url``, the provider's cookies in ``idp``;
    return the app's browser (a cookie jar apart from the provider's, which shares the
    host 127.0.0.1; cookies ignore the port, so it also holds for the other server)."""
    browser = requests.Session()
    csrf = browser.get(f"{url}/auth/csrf", timeout=10).json()["csrfToken"]
    start = browser.post(
        f"{url}/auth/signin/{client_id}?login_hint={account}",
        data={"csrfToken": csrf},
        allow_redirects=False,
        timeout=10,
    )
    assert start.status_code == 302, start.text
    callback = follow_to_app(idp, start.headers["Location"], origin=url)
    done = browser.get(callback, allow_redirects=False, timeout=10)
    assert done.status_code == 302 and "error=" not in done.headers["Location"], done.headers
    assert browser.get(f"{url}/auth/session", timeout=10).json()["user"]["name"]
    return browser


def test_backchannel_logout_ends_the_sessions_on_every_instance(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask], database_url: str, tmp_path: Path
) -> None:
    client_id = f"bcl-{uuid.uuid4().hex[:10]}"
    entry = node_op.provider_config(
        client_id, method="client_secret_basic", backchannel_logout=True
    )
    app = make_oauth_app([entry])  # on the same database: to read it, and empty it afterwards
    config = str(write_providers_toml(tmp_path / "auth.toml", [entry]))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        run_server(tmp_path / "a", database=database_url, AUTH_CONFIG=config) as first,
        run_server(tmp_path / "b", database=database_url, AUTH_CONFIG=config) as second,
    ):
        servers = (first.url, second.url)
        node_op.add_client(
            client_id,
            auth_url=first.url + "/auth",  # back-channel logout goes to the first only
            redirect_uris=[f"{url}/auth/callback/{client_id}" for url in servers],
            post_logout_redirect_uris=[f"{url}/auth/signout/callback" for url in servers],
        )
        idp = requests.Session()  # one browser at the provider: one provider session
        alice = [server_sign_in(url, client_id, idp) for url in servers]
        bob = server_sign_in(first.url, client_id, requests.Session(), account="bob")
        with app.app_context():
            rows = db.session.execute(
                sa.select(Session.id, Session.provider_sid, Session.provider_sub)
            ).all()
        assert sorted(r.provider_sub for r in rows) == ["alice", "alice", "bob"]
        [sid] = {r.provider_sid for r in rows if r.provider_sub == "alice"}
        [bob_row] = [r for r in rows if r.provider_sub == "bob"]
        assert sid and bob_row.provider_sid and bob_row.provider_sid != sid

        node_op.end_op_session(idp)

        [delivery] = node_op.wait_backchannel(client_id)
        assert delivery["url"] == f"{first.url}/auth/backchannel-logout/{client_id}"
        assert (delivery["status"], delivery["ok"], delivery["error"]) == (200, True, None)
        assert (delivery["sid"], delivery["sub"]) == (sid, "alice")
        for url in servers:
            for browser in alice:
                assert browser.get(f"{url}/auth/session", timeout=10).json() is None, url
            # Bob's session, made on the first, works on both, and lives on.
            assert bob.get(f"{url}/auth/session", timeout=10).json()["user"]["name"] == "Bob"
    with app.app_context():
        assert db.session.execute(sa.select(Session.id)).scalars().all() == [bob_row.id]
        used = db.session.execute(sa.text("SELECT provider, jti FROM used_logout_tokens")).all()
    jti = jwt.decode(delivery["logout_token"], node_op.op_key).claims["jti"]
    assert [tuple(u) for u in used] == [(client_id, jti)]
    log = first.access_log.read_text()
    assert f'"POST /auth/backchannel-logout/{client_id} HTTP/1.1" 200' in log


# -- 4. logout tokens -------------------------------------------------------------------------


@dataclass
class Backchannel:
    """An app with back-channel logout on for op-basic and op-post (not op-jwt), and
    sessions (by name) that logout tokens may name."""

    app: Flask
    entries: list[dict[str, Any]]
    users: dict[str, int]
    sessions: dict[str, int]

    def post(self, token: str | None = None, provider: str = "op-basic", **request: Any) -> Any:
        if token is not None:
            request.setdefault("data", {"logout_token": token})
        return self.app.test_client().post(f"/auth/backchannel-logout/{provider}", **request)

    def left(self) -> set[str]:
        """The names of the sessions still there."""
        with self.app.app_context():
            ids = set(db.session.execute(sa.select(Session.id)).scalars())
        return {name for name, sid in self.sessions.items() if sid in ids}

    def used(self) -> set[tuple[str, str]]:
        """The (provider, jti) of the used logout tokens remembered."""
        with self.app.app_context(), db.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT provider, jti FROM used_logout_tokens")).all()
        return {(str(r[0]), str(r[1])) for r in rows}

    def spend_long_ago(self) -> None:
        """Remember a used token whose time is over (SPENT_LONG_AGO): the next token
        accepted forgets it, a refused one changes nothing."""
        with self.app.app_context():
            provider, jti = SPENT_LONG_AGO
            expires = datetime.now(UTC) - timedelta(hours=1)
            db.session.add(UsedLogoutToken(provider=provider, jti=jti, expires=expires))
            db.session.commit()


@pytest.fixture
def bcl(
    node_op: NodeOP,
    make_oauth_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    session_factory: Callable[..., Any],
) -> Backchannel:
    entries = [
        node_op.provider_config("op-basic", backchannel_logout=True),
        node_op.provider_config("op-post", backchannel_logout=True),
        node_op.provider_config("op-jwt"),
    ]
    app = make_oauth_app(entries)
    users = {
        "alice": user_factory(app, email="alice@example.com"),
        "bob": user_factory(app, email="bob@example.com"),
    }
    layout = {
        # name: (user, provider, sid, sub)
        "alice-1": ("alice", "op-basic", "sid-1", "alice"),
        "alice-2": ("alice", "op-basic", "sid-2", "alice"),
        "alice-post": ("alice", "op-post", "sid-1", "alice"),
        "alice-jwt": ("alice", "op-jwt", "sid-1", "alice"),
        "alice-mail": ("alice", "email", None, None),
        "bob-1": ("bob", "op-basic", "sid-3", "bob"),
    }
    sessions = {
        name: session_factory(
            app, users[user], provider=provider, provider_sid=sid, provider_sub=sub
        ).id
        for name, (user, provider, sid, sub) in layout.items()
    }
    found = Backchannel(app, entries, users, sessions)
    found.spend_long_ago()
    return found


ALL = {"alice-1", "alice-2", "alice-post", "alice-jwt", "alice-mail", "bob-1"}
SPENT_LONG_AGO = ("op-basic", "spent-long-ago")


def refused(answer: Any) -> None:
    assert answer.status_code == 400, (answer.status_code, answer.get_data(as_text=True))
    assert answer.json == {"error": "invalid_request"}
    assert "no-store" in answer.headers["Cache-Control"]


def accepted(answer: Any) -> None:
    assert answer.status_code == 200, (answer.status_code, answer.get_data(as_text=True))
    assert "no-store" in answer.headers["Cache-Control"]


@functools.cache
def stranger_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid})


def good(op: NodeOP, **claims: Any) -> str:
    """A logout token op-basic would accept, naming sid-1 and alice (session alice-1)."""
    claims.setdefault("sub", "alice")
    claims.setdefault("sid", "sid-1")
    return op.logout_token("op-basic", **claims)


def good_claims(op: NodeOP, **claims: Any) -> dict[str, Any]:
    return dict(jwt.decode(good(op, **claims), op.op_key).claims)


def unsigned(claims: Mapping[str, Any]) -> str:
    def part(data: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'logout+jwt'})}.{part(claims)}."


def form(token: str) -> dict[str, Any]:
    return {"data": {"logout_token": token}}


def id_token(op: NodeOP, **params: str) -> str:
    """A real ID token for op-basic (sub alice), from the provider itself."""
    return str(op.code_tokens(requests.Session(), "op-basic", **params)["id_token"])


def swapped_payload(op: NodeOP) -> str:
    """alice-1's token, its payload replaced by bob's (validly signed elsewhere)."""
    header, _, signature = good(op).split(".")
    return f"{header}.{good(op, sub='bob', sid='sid-3').split('.')[1]}.{signature}"


LOGOUT_TYP = {"typ": "logout+jwt"}
#: Requests the back-channel endpoint must refuse: name -> the request (test client kwargs).
HOSTILE: dict[str, Callable[[NodeOP], dict[str, Any]]] = {
    "forged: another key, the provider's kid": lambda op: form(
        op.sign(good_claims(op), LOGOUT_TYP, key=stranger_key(OP_KID))
    ),
    "forged: another key, unknown kid": lambda op: form(
        op.sign(good_claims(op), {**LOGOUT_TYP, "kid": "stranger"}, key=stranger_key("stranger"))
    ),
    "forged: another key, no kid": lambda op: form(
        op.sign(good_claims(op), {**LOGOUT_TYP, "kid": None}, key=stranger_key(OP_KID))
    ),
    "unsigned (alg none)": lambda op: form(unsigned(good_claims(op))),
    "HS256 with the client secret": lambda op: form(
        op.sign(good_claims(op), {**LOGOUT_TYP, "alg": "HS256"}, key=OctKey.import_key(SECRET))
    ),
    "HS256 with the client secret, no kid": lambda op: form(
        op.sign(
            good_claims(op),
            {**LOGOUT_TYP, "alg": "HS256", "kid": None},
            key=OctKey.import_key(SECRET),
        )
    ),
    "signature cut off": lambda op: form(good(op).rsplit(".", 1)[0] + "."),
    "payload swapped under the signature": lambda op: form(swapped_payload(op)),
    "wrong audience (another client)": lambda op: form(good(op, aud="op-post")),
    "audience list without us": lambda op: form(good(op, aud=["op-post", "op-jwt"])),
    "wrong issuer": lambda op: form(good(op, iss="http://127.0.0.1:1")),
    "issuer with a trailing slash": lambda op: form(good(op, iss=op.issuer + "/")),
    "iat too old": lambda op: form(good(op, iat=int(time.time()) - 300 - 60 - 5)),
    "exp past": lambda op: form(
        good(op, iat=int(time.time()) - 100, exp=int(time.time()) - 60 - 5)
    ),
    "iat in the future": lambda op: form(
        good(op, iat=int(time.time()) + 60 + 10, exp=int(time.time()) + 300)
    ),
    "no iat": lambda op: form(good(op, iat=None)),
    "iat not a number": lambda op: form(good(op, iat=str(int(time.time())))),
    "exp not a number": lambda op: form(good(op, exp="tomorrow")),
    "nonce": lambda op: form(good(op, nonce="n-1")),
    "no events": lambda op: form(good(op, events=None)),
    "wrong event": lambda op: form(good(op, events={"http://schemas.openid.net/event/other": {}})),
    "event not an object": lambda op: form(good(op, events={EVENT: "yes"})),
    "events a list": lambda op: form(good(op, events=[EVENT])),
    "neither sid nor sub": lambda op: form(good(op, sid=None, sub=None)),
    "sid not a string": lambda op: form(good(op, sid=1)),
    "sub empty": lambda op: form(good(op, sub="", sid=None)),
    "no jti": lambda op: form(good(op, jti=None)),
    "jti empty": lambda op: form(good(op, jti="")),
    "jti not a string": lambda op: form(good(op, jti=12345)),
    "typ at+jwt": lambda op: form(good(op, header={"typ": "at+jwt"})),
    "typ secevent+jwt": lambda op: form(good(op, header={"typ": "secevent+jwt"})),
    "an ID token (nonce)": lambda op: form(id_token(op, nonce="n-1")),
    "an ID token (no nonce)": lambda op: form(id_token(op)),
    "JSON body": lambda op: {"json": {"logout_token": good(op)}},
    "token in the query string": lambda op: {"query_string": {"logout_token": good(op)}},
    "missing field": lambda op: {"data": {}},
    "empty field": lambda op: form(""),
    "huge token (> 16 KB), validly signed": lambda op: form(good(op, padding="x" * 17_000)),
    "garbage": lambda op: form("not a logout token"),
    "three garbage parts": lambda op: form("a.b.c"),
    "token posted to another provider's endpoint": lambda op: {
        **form(good(op)),
        "provider": "op-post",
    },
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_logout_request_is_refused_and_changes_nothing(
    node_op: NodeOP, bcl: Backchannel, case: str
) -> None:
    request = HOSTILE[case](node_op)
    if "data" in request and "logout_token" in request["data"]:
        size = len(request["data"]["logout_token"])
        assert (size > 16384) is case.startswith("huge"), size
    refused(bcl.post(**request))
    assert bcl.left() == ALL
    assert bcl.used() == {SPENT_LONG_AGO}
    # The sessions were there to be ended: a valid token for them does.
    token = good(node_op)
    accepted(bcl.post(token))
    assert bcl.left() == ALL - {"alice-1"}
    assert bcl.used() == {("op-basic", jwt.decode(token, node_op.op_key).claims["jti"])}


@pytest.mark.parametrize(
    "case",
    [
        "as the provider makes them",
        "typ JWT",
        "no typ",
        "typ application/logout+jwt",
        "audience list with us",
        "no exp",
        "iat within the leeway ahead",
    ],
)
def test_accepted_logout_token_shapes(node_op: NodeOP, bcl: Backchannel, case: str) -> None:
    now = int(time.time())
    token = {
        "as the provider makes them": lambda: good(node_op),
        "typ JWT": lambda: good(node_op, header={"typ": "JWT"}),
        "no typ": lambda: good(node_op, header={"typ": None}),
        "typ application/logout+jwt": lambda: good(
            node_op, header={"typ": "application/logout+jwt"}
        ),
        "audience list with us": lambda: good(node_op, aud=["op-post", "op-basic"]),
        "no exp": lambda: good(node_op, exp=None),
        "iat within the leeway ahead": lambda: good(node_op, iat=now + 30, exp=now + 150),
    }[case]()
    answer = bcl.post(token)
    accepted(answer)
    assert answer.get_data() == b""
    assert bcl.left() == ALL - {"alice-1"}
    jti = jwt.decode(token, node_op.op_key).claims["jti"]
    assert bcl.used() == {("op-basic", jti)}  # and the one spent long ago forgotten


def test_a_sid_ends_only_that_provider_sessions_sessions(node_op: NodeOP, bcl: Backchannel) -> None:
    # sid-1 at op-basic; op-post and op-jwt have a sid-1 of their own.
    accepted(bcl.post(node_op.logout_token("op-basic", sub=None, sid="sid-1")))
    assert bcl.left() == ALL - {"alice-1"}
    # sid and sub: both must fit.
    accepted(bcl.post(node_op.logout_token("op-basic", sub="bob", sid="sid-2")))
    assert bcl.left() == ALL - {"alice-1"}
    accepted(bcl.post(node_op.logout_token("op-basic", sub="alice", sid="sid-2")))
    assert bcl.left() == ALL - {"alice-1", "alice-2"}
    # The other provider's own token ends its own sid-1.
    accepted(bcl.post(node_op.logout_token("op-post", sub=None, sid="sid-1"), provider="op-post"))
    assert bcl.left() == {"alice-jwt", "alice-mail", "bob-1"}


def test_a_sub_alone_ends_all_of_that_persons_sessions_from_that_provider(
    node_op: NodeOP, bcl: Backchannel
) -> None:
    accepted(bcl.post(node_op.logout_token("op-basic", sub="alice")))
    assert bcl.left() == {"alice-post", "alice-jwt", "alice-mail", "bob-1"}
    accepted(bcl.post(node_op.logout_token("op-basic", sub="bob")))
    assert bcl.left() == {"alice-post", "alice-jwt", "alice-mail"}


def test_nothing_matched_is_200_and_the_token_is_spent(node_op: NodeOP, bcl: Backchannel) -> None:
    for token in (
        node_op.logout_token("op-basic", sub=None, sid="sid-unknown"),
        node_op.logout_token("op-basic", sub="mallory"),
        node_op.logout_token("op-basic", sub="alice", sid="sid-3"),  # bob's sid
    ):
        answer = bcl.post(token)
        accepted(answer)
        assert bcl.left() == ALL
        refused(bcl.post(token))
    assert len(bcl.used()) == 3


def test_unknown_provider_or_backchannel_off_is_404(node_op: NodeOP, bcl: Backchannel) -> None:
    for provider in ("nope", "op-jwt", "demo", "email"):
        token = node_op.logout_token(provider, sub="alice", sid="sid-1")
        answer = bcl.post(token, provider=provider)
        assert answer.status_code == 404, provider
    assert bcl.left() == ALL and bcl.used() == {SPENT_LONG_AGO}


def test_provider_keys_unreachable_is_400_and_changes_nothing(
    node_op: NodeOP, bcl: Backchannel, make_oauth_app: Callable[..., Flask]
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    broken = make_oauth_app(
        [node_op.provider_config("op-basic", backchannel_logout=True, issuer=down)]
    )
    token = good(node_op)
    refused(
        broken.test_client().post("/auth/backchannel-logout/op-basic", data=form(token)["data"])
    )
    assert bcl.left() == ALL and bcl.used() == {SPENT_LONG_AGO}
    # Not spent: the provider may send it again once we can check it.
    accepted(bcl.post(token))
    assert bcl.left() == ALL - {"alice-1"}


def test_an_unknown_kid_refetches_the_keys_at_most_once_a_minute(
    fake: FakeIdP,
    make_oauth_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    session_factory: Callable[..., Any],
) -> None:
    """The provider rotates its key: the new kid is fetched at once; made-up kids cost the
    provider one fetch a minute at most (jwks_refetch_interval). FakeIdP: the real
    provider's keys cannot change while it runs."""
    app = make_oauth_app([fake.provider_config(backchannel_logout=True)])
    user = user_factory(app)
    for sid in ("s-1", "s-2"):
        session_factory(app, user, provider="fake", provider_sid=sid, provider_sub="user-1")
    client = app.test_client()

    def post(key: Any, sid: str) -> Any:
        now = int(time.time())
        claims = {
            "iss": fake.issuer,
            "aud": fake.client_id,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(16),
            "events": {EVENT: {}},
            "sid": sid,
        }
        header = {"alg": "RS256", "kid": key.kid, "typ": "logout+jwt"}
        token = jwt.encode(header, claims, key, algorithms=["RS256"])
        return client.post("/auth/backchannel-logout/fake", data={"logout_token": token})

    def left() -> list[str | None]:
        with app.app_context():
            return sorted(db.session.execute(sa.select(Session.provider_sid)).scalars())

    # Frozen (and ticking) throughout: freezegun's monotonic clock, which the refetch
    # interval reads, counts from the frozen time.
    start = datetime.now(UTC)
    with freeze_time(start, tick=True) as clock:
        old_key = fake.sign_key
        accepted(post(old_key, "s-1"))
        assert fake.hits["/jwks"] == 1
        new_key = RSAKey.generate_key(2048, parameters={"kid": "k2"})
        fake.jwks = [new_key.as_dict(private=False)]
        accepted(post(new_key, "s-2"))  # an unknown kid: fetched again, at once
        assert fake.hits["/jwks"] == 2
        assert left() == []
        for _ in range(5):
            refused(post(stranger_key("made-up"), "s-3"))
        refused(post(old_key, "s-3"))  # k1 is gone from the provider's set
        assert fake.hits["/jwks"] == 2
        clock.move_to(start + timedelta(seconds=30))
        refused(post(stranger_key("made-up"), "s-3"))
        assert fake.hits["/jwks"] == 2
        clock.move_to(start + timedelta(seconds=62))
        refused(post(stranger_key("made-up"), "s-3"))
        assert fake.hits["/jwks"] == 3


def test_a_replayed_token_is_refused(
    node_op: NodeOP, bcl: Backchannel, session_factory: Callable[..., Any]
) -> None:
    token = node_op.logout_token("op-basic", sub="alice")
    accepted(bcl.post(token))
    assert bcl.left() == ALL - {"alice-1", "alice-2"}
    jti = jwt.decode(token, node_op.op_key).claims["jti"]
    assert bcl.used() == {("op-basic", jti)}
    # Alice signs in again; the same token, replayed, must not end the new session.
    again = session_factory(
        bcl.app, bcl.users["alice"], provider="op-basic", provider_sid="sid-4", provider_sub="alice"
    )
    bcl.sessions["alice-again"] = again.id
    bcl.spend_long_ago()
    refused(bcl.post(token))
    assert bcl.left() == ALL - {"alice-1", "alice-2"} | {"alice-again"}
    assert bcl.used() == {("op-basic", jti), SPENT_LONG_AGO}  # not even the housekeeping


def test_a_token_used_on_one_instance_is_refused_on_another(
    node_op: NodeOP, bcl: Backchannel, make_oauth_app: Callable[..., Flask]
) -> None:
    other = make_oauth_app(bcl.entries)  # another instance, the same database
    token = node_op.logout_token("op-basic", sub=None, sid="sid-1")
    accepted(bcl.post(token))
    refused(other.test_client().post("/auth/backchannel-logout/op-basic", data=form(token)["data"]))
    assert bcl.left() == ALL - {"alice-1"}
    # The other instance does take tokens of its own.
    fresh = node_op.logout_token("op-basic", sub=None, sid="sid-2")
    accepted(
        other.test_client().post("/auth/backchannel-logout/op-basic", data=form(fresh)["data"])
    )
    assert bcl.left() == ALL - {"alice-1", "alice-2"}


def test_one_token_raced_on_two_instances_is_taken_once(
    node_op: NodeOP, bcl: Backchannel, make_oauth_app: Callable[..., Flask]
) -> None:
    apps = [bcl.app, make_oauth_app(bcl.entries)]
    token = node_op.logout_token("op-basic", sub="alice")
    start = threading.Barrier(8)

    def post(n: int) -> int:
        client = apps[n % 2].test_client()
        start.wait()
        answer = client.post("/auth/backchannel-logout/op-basic", data={"logout_token": token})
        return int(answer.status_code)

    with ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(post, range(8)))
    assert statuses == [200] + [400] * 7
    assert bcl.left() == ALL - {"alice-1", "alice-2"}
    assert len(bcl.used()) == 1


def test_token_times_follow_the_clock(node_op: NodeOP, bcl: Backchannel) -> None:
    """Accepted until iat + 300 s + the 60 s leeway (or exp + leeway, if sooner); an iat
    ahead of the clock only within the leeway. The clock is frozen (freezegun patches
    time.time, which the validation reads), the tokens name no session."""
    iat = int(time.time())
    moment = datetime.fromtimestamp(iat, UTC)

    def at(offset: float, **claims: Any) -> int:
        token = node_op.logout_token("op-basic", sub=None, sid="sid-none", iat=iat, **claims)
        with freeze_time(moment + timedelta(seconds=offset), tick=True):
            return int(bcl.post(token).status_code)

    assert at(300 + 60 - 3, exp=None) == 200
    assert at(300 + 60 + 3, exp=None) == 400
    assert at(120 + 60 - 3) == 200  # exp = iat + 120
    assert at(120 + 60 + 3) == 400
    assert at(-(60 - 3)) == 200
    assert at(-(60 + 3)) == 400
    assert bcl.left() == ALL
    assert len(bcl.used()) == 3


# -- 5. the signal ------------------------------------------------------------------------------


def test_provider_signed_out_is_sent_once_after_the_commit(
    node_op: NodeOP, bcl: Backchannel, database_url: str
) -> None:
    outside = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    seen: list[dict[str, Any]] = []

    def receiver(_sender: Any, **details: Any) -> None:
        # Another connection: it sees only what is committed.
        with outside.connect() as conn:
            details["alice_left"] = conn.execute(
                sa.text(
                    "SELECT count(*) FROM sessions WHERE provider = 'op-basic' "
                    "AND provider_sub = 'alice'"
                )
            ).scalar_one()
            details["used"] = conn.execute(
                sa.text("SELECT count(*) FROM used_logout_tokens")
            ).scalar_one()
        details["session_ids"] = sorted(details["session_ids"])
        seen.append(details)

    try:
        with provider_signed_out.connected_to(receiver):
            refused(bcl.post(good(node_op, nonce="n-1")))
            assert seen == []
            accepted(bcl.post(node_op.logout_token("op-basic", sub="alice")))
            accepted(bcl.post(node_op.logout_token("op-basic", sub=None, sid="sid-none")))
    finally:
        outside.dispose()
    assert seen == [
        {
            "provider": "op-basic",
            "session_ids": sorted([bcl.sessions["alice-1"], bcl.sessions["alice-2"]]),
            "user_ids": [bcl.users["alice"]],
            "alice_left": 0,
            "used": 1,
        },
        {"provider": "op-basic", "session_ids": [], "user_ids": [], "alice_left": 0, "used": 2},
    ]


# -- 6. migration 0005 ------------------------------------------------------------------------


def test_migration_0005_down_and_up_keeps_the_sessions(
    empty_database: str, node_op: NodeOP, tmp_path: Path
) -> None:
    entry = node_op.provider_config("op-basic", backchannel_logout=True)
    config = write_providers_toml(tmp_path / "auth.toml", [entry])
    app = create_app(base_config(empty_database, AUTH_CONFIG=str(config)), environ={})
    postgres = empty_database.startswith("postgresql")
    now = datetime.now(UTC)
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
        user = User(email="alice@example.com")
        db.session.add(user)
        db.session.flush()
        rows = [
            Session(
                user_id=user.id,
                token_hash=hash_token(new_token()),
                expires=now + timedelta(days=1),
                created_at=now,
                last_active_at=now,
                provider=provider,
                provider_sid=sid,
                provider_sub=sub,
                id_token=token,
            )
            for provider, sid, sub, token in [
                ("op-basic", "sid-old", "alice", "an-id-token"),
                (None, None, None, None),
            ]
        ]
        db.session.add_all(rows)
        db.session.commit()
        known, plain = (int(r.id) for r in rows)
        hashes = {int(r.id): r.token_hash for r in rows}
        db.session.close()

        downgrade(directory=str(MIGRATIONS_DIR), revision=BEFORE_0005)
        inspector = sa.inspect(db.engine)
        columns = {c["name"] for c in inspector.get_columns("sessions")}
        assert "provider_sid" in columns and not {"provider_sub", "id_token"} & columns
        assert not {"used_logout_tokens", "device_requests"} & set(inspector.get_table_names())
        with db.engine.connect() as conn:
            view = conn.execute(sa.text("SELECT * FROM active_sessions ORDER BY session_id"))
            assert set(view.keys()) == VIEW_COLUMNS_0004
            assert [r.session_id for r in view] == sorted([known, plain])
            kept = conn.execute(sa.text("SELECT id, token_hash, provider_sid FROM sessions")).all()
            assert {r.id: (r.token_hash, r.provider_sid) for r in kept} == {
                known: (hashes[known], "sid-old"),
                plain: (hashes[plain], None),
            }
            if postgres:
                comment = conn.execute(
                    sa.text("SELECT obj_description('active_sessions'::regclass, 'pg_class')")
                ).scalar_one()
                assert "never the token hash" in comment and "identity provider" not in comment

        upgrade(directory=str(MIGRATIONS_DIR))
        with db.engine.connect() as conn:
            view = conn.execute(sa.text("SELECT * FROM active_sessions"))
            assert set(view.keys()) == VIEW_COLUMNS
            assert {r.session_id: bool(r.provider_session_known) for r in view} == {
                known: True,  # the sid was kept
                plain: False,
            }
            back = conn.execute(
                sa.text("SELECT provider_sub, id_token FROM sessions WHERE id = :id"), {"id": known}
            ).one()
            assert tuple(back) == (None, None)
        assert count(app, "used_logout_tokens") == count(app, "device_requests") == 0
        db.session.close()

    # A session from before 0005 has no sub: a token naming its sid (and a sub) reaches it.
    token = node_op.logout_token("op-basic", sub="alice", sid="sid-old")
    answer = app.test_client().post(
        "/auth/backchannel-logout/op-basic", data={"logout_token": token}
    )
    assert answer.status_code == 200
    with app.app_context():
        assert db.session.execute(sa.select(Session.id)).scalars().all() == [plain]
        db.session.close()
        db.engine.dispose()


# -- 7. rotating AUTH_SECRET ------------------------------------------------------------------


def test_rotate_secrets_reseals_the_sessions_id_tokens(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    client_id = logout_client(node_op, "rot")
    entries = [node_op.provider_config(client_id, logout="rp-initiated")]
    app_a = make_oauth_app(entries)  # AUTH_SECRET = TEST_SECRET
    browser = sign_in(app_a, client_id)
    token = cookie_of(browser.client)
    before = session_row(app_a, token)
    assert before is not None
    id_token = session_id_token(app_a, before["id"])
    assert id_token is not None and before["id_token"].startswith(prefix_of(app_a))

    rotated = make_oauth_app(entries, AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=TEST_SECRET)
    result = rotated.test_cli_runner().invoke(args=["auth", "rotate-secrets"])
    assert result.exit_code == 0, result.output
    # The account's tokens and the session's ID token.
    assert "re-sealed 2 row(s) under the current secret" in result.output
    after = session_row(rotated, token)
    assert after is not None and after["id"] == before["id"]
    assert after["id_token"].startswith(prefix_of(rotated)) and id_token not in after["id_token"]
    assert after["id_token"] != before["id_token"]

    # The new secret alone reads it: signing out there sends the very ID token as the hint,
    # and the provider takes it.
    only_b = make_oauth_app(entries, AUTH_SECRET=SECRET_B)
    there = Browser(only_b.test_client())
    there.idp = browser.idp
    there.client.set_cookie(COOKIE, token)
    answer = sign_out(there)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert single_params(location)["id_token_hint"] == id_token
    assert node_op.end_session(there.idp, location).startswith(POST_LOGOUT_REDIRECT_URI + "?")
    assert count(only_b, "sessions") == 0
