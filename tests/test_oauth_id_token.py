"""ID token and callback validation against a provider the tests control (docs/oauth.md,
"The callback" and "ID token validation")."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey

from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.oauth import SECRET, Browser, FakeIdP, error_of, fake_idp, query_of
from .support.rows import row_count


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as provider:
        yield provider


@pytest.fixture
def app(fake: FakeIdP, make_oauth_app: Callable[..., Flask]) -> Flask:
    return make_oauth_app([fake.provider_config()])


def sign_in(app: Flask) -> Any:
    return Browser(app.test_client()).sign_in("fake")


def test_valid_id_token_signs_in_and_keeps_the_sid(fake: FakeIdP, app: Flask) -> None:
    fake.claims = {"sid": "op-session-1"}
    assert error_of(sign_in(app)) is None
    with app.app_context():
        session = db.session.execute(sa.select(Session)).scalar_one()
        user = db.session.execute(sa.select(User)).scalar_one()
        assert session.provider_sid == "op-session-1"
        assert (user.email, user.name) == ("fay@example.com", "Fay")


def _unsigned(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


def _hs256(fake: FakeIdP) -> str:
    # Signed with the client secret, or with the RSA public key as an HMAC secret: refused.
    now = int(time.time())
    claims = {
        "iss": fake.issuer,
        "sub": "user-1",
        "aud": fake.client_id,
        "iat": now,
        "exp": now + 60,
    }
    return jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(SECRET), algorithms=["HS256"])


BAD_TOKENS: dict[str, Callable[[FakeIdP], None]] = {
    "bad signature": lambda f: setattr(
        f, "sign_key", RSAKey.generate_key(2048, parameters={"kid": "k1"})
    ),
    "wrong iss": lambda f: f.claims.update(iss="http://127.0.0.1:1/other"),
    "wrong aud": lambda f: f.claims.update(aud="another-client"),
    "several aud, no azp": lambda f: f.claims.update(aud=[f.client_id, "another-client"]),
    "wrong azp": lambda f: f.claims.update(azp="another-client"),
    "wrong nonce": lambda f: f.claims.update(nonce="not-the-nonce"),
    "no nonce": lambda f: f.claims.update(nonce=None),
    "expired": lambda f: f.claims.update(exp=int(time.time()) - 3600),
    "issued in the future": lambda f: f.claims.update(iat=int(time.time()) + 3600),
    "no sub": lambda f: f.claims.update(sub=None),
    "unknown kid": lambda f: f.header.update(kid="ghost"),
    "alg none": lambda f: f.token_extra.update(id_token=_unsigned({"iss": f.issuer})),
    "alg HS256": lambda f: f.token_extra.update(id_token=_hs256(f)),
    "not a JWT": lambda f: f.token_extra.update(id_token="garbage"),
    "no id_token": lambda f: f.token_extra.update(id_token=None),
    "userinfo sub mismatch": lambda f: f.userinfo.update(sub="someone-else"),  # type: ignore[union-attr]
    "userinfo down": lambda f: setattr(f, "userinfo", None),
    "no kid, two keys fit": lambda f: (
        f.header.update(kid=None),
        f.jwks.append(RSAKey.generate_key(2048, parameters={"kid": "k2"}).as_dict(private=False)),
    ),
}


#: The cases that say the client's settings at the provider are wrong (the site's fault).
CONFIGURATION_CASES = frozenset({"alg none", "alg HS256", "no id_token"})


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_invalid_id_token_is_refused_and_nothing_stored(
    fake: FakeIdP, app: Flask, case: str
) -> None:
    BAD_TOKENS[case](fake)
    expected = "Configuration" if case in CONFIGURATION_CASES else "OAuthCallback"
    assert error_of(sign_in(app)) == expected
    assert row_count(app, User) == row_count(app, Account) == row_count(app, Session) == 0


def test_token_without_kid_uses_the_one_key_that_fits(fake: FakeIdP, app: Flask) -> None:
    fake.header = {"kid": None}
    ec = ECKey.generate_key("P-256", parameters={"kid": "ec"}).as_dict(private=False)
    encryption = RSAKey.generate_key(2048, parameters={"use": "enc"}).as_dict(private=False)
    fake.jwks = [
        {"kty": "nonsense", "kid": "x"},
        {"kty": "RSA", "kid": "broken", "n": "AQAB"},
        ec,
        encryption,
        *fake.jwks,
    ]
    assert error_of(sign_in(app)) is None


def test_es256_id_tokens_are_accepted(fake: FakeIdP, app: Flask) -> None:
    fake.sign_key = ECKey.generate_key("P-256", parameters={"kid": "ec1"})
    fake.jwks = [fake.sign_key.as_dict(private=False)]
    assert error_of(sign_in(app)) is None


def test_key_rotation_between_two_sign_ins(fake: FakeIdP, app: Flask) -> None:
    assert error_of(sign_in(app)) is None
    fake.sign_key = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    fake.jwks = [fake.sign_key.as_dict(private=False)]
    assert error_of(sign_in(app)) is None
    assert fake.hits["/jwks"] == 2


def test_a_burst_of_unknown_kids_refetches_the_keys_once(fake: FakeIdP, app: Flask) -> None:
    assert error_of(sign_in(app)) is None
    for n in range(4):
        fake.header = {"kid": f"ghost-{n}"}
        assert error_of(sign_in(app)) == "OAuthCallback"
    assert fake.hits["/jwks"] == 2
    assert fake.hits["/.well-known/openid-configuration"] == 1  # cached


def test_discovery_issuer_mismatch_stops_before_the_redirect(fake: FakeIdP, app: Flask) -> None:
    fake.discovery["issuer"] = "https://elsewhere.example"
    response = Browser(app.test_client()).start("fake")
    assert error_of(response) == "OAuthSignin"
    assert not [c for c in response.headers.getlist("Set-Cookie") if c.startswith("auth.")]
    assert fake.hits["/authorize"] == 0


def test_discovered_http_endpoint_off_loopback_is_refused(fake: FakeIdP, app: Flask) -> None:
    fake.discovery["token_endpoint"] = "http://idp.example.com/token"
    assert error_of(Browser(app.test_client()).start("fake")) == "OAuthSignin"
    assert fake.hits["/authorize"] == 0


def test_discovery_is_retried_after_a_failure(fake: FakeIdP, app: Flask) -> None:
    fake.routes["/.well-known/openid-configuration"] = lambda r: (503, {}, {})
    assert error_of(Browser(app.test_client()).start("fake")) == "OAuthSignin"
    fake.routes["/.well-known/openid-configuration"] = lambda r: (200, {}, fake.discovery)
    assert error_of(sign_in(app)) is None


@pytest.mark.parametrize("iss", ["http://127.0.0.1:1/mix-up", None])
def test_authorization_response_iss_must_be_our_issuer(
    fake: FakeIdP, app: Flask, iss: str | None
) -> None:
    """RFC 9207: the provider advertises iss, so a wrong or missing one is a mix-up."""
    browser = Browser(app.test_client())
    callback = browser.authorize(browser.start("fake").headers["Location"])
    params = dict(query_of(callback))
    if iss is None:
        del params["iss"]
    else:
        params["iss"] = iss
    response = browser.client.get("/auth/callback/fake", query_string=params)
    assert error_of(response) == "OAuthCallback"
    assert fake.hits["/token"] == 0


def test_stalling_token_endpoint_is_oauth_callback(
    fake: FakeIdP, make_oauth_app: Callable[..., Flask]
) -> None:
    app = make_oauth_app([fake.provider_config()], AUTH_HTTP_READ_TIMEOUT="0.5")
    release = threading.Event()

    def stall(request: Any) -> tuple[int, dict[str, str], Any]:
        release.wait(30)
        return 500, {}, {}

    fake.routes["/token"] = stall
    try:
        assert error_of(sign_in(app)) == "OAuthCallback"
    finally:
        release.set()
    assert row_count(app, User) == 0


def test_concurrent_first_sign_ins_create_one_user(fake: FakeIdP, app: Flask) -> None:
    """Two callbacks for one new identity at once: one user and one account, both signed in."""
    browsers = [Browser(app.test_client()) for _ in range(2)]
    callbacks = [b.authorize(b.start("fake").headers["Location"]) for b in browsers]
    both_at_userinfo = threading.Barrier(2)
    answer = fake.routes["/userinfo"]

    def userinfo(request: Any) -> tuple[int, dict[str, str], Any]:
        # Hold each callback until the other has exchanged its code too, so both go on to
        # create the user at the same moment.
        both_at_userinfo.wait(30)
        return answer(request)

    fake.routes["/userinfo"] = userinfo
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        results[i] = browsers[i].client.get(callbacks[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [(r.status_code, error_of(r)) for r in results] == [(302, None), (302, None)]
    assert (row_count(app, User), row_count(app, Account), row_count(app, Session)) == (1, 1, 2)
