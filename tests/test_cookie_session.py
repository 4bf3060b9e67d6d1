"""Flask's signed-cookie session (webapp/browser_state/flask_session.py): read only when used, in
itsdangerous's format, and the CSRF tokens signed from it (extensions.CSRFProtect.token)."""

from __future__ import annotations

import hashlib

import pytest
from flask import Flask, Response, session
from flask.json.tag import TaggedJSONSerializer
from flask.sessions import SecureCookieSessionInterface
from flask_wtf.csrf import validate_csrf
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from itsdangerous.signer import HMACAlgorithm
from wtforms import ValidationError

from webapp.browser_state.flask_session import CookieSessionInterface, KeyedOnceSerializer
from webapp.core.cache_headers import add_vary

CSRF_COOKIE = "auth.csrf-token"


def _csrf_cookie(client) -> str:
    cookie = client.get_cookie(CSRF_COOKIE)
    assert cookie is not None
    return cookie.value


def test_a_request_that_never_uses_the_flask_session_leaves_its_cookie_alone(client):
    token = client.get("/auth/csrf").json["csrfToken"]
    assert token
    before = _csrf_cookie(client)
    for path in ("/auth/session", "/auth/providers"):
        r = client.get(path)
        assert r.status_code == 200
        assert "Set-Cookie" not in r.headers, path
        assert "Cookie" not in r.headers.get("Vary", ""), path
    # /auth/csrf reads it (so its answer varies by cookie) and signs the secret it holds.
    r = client.get("/auth/csrf")
    assert "Set-Cookie" not in r.headers
    assert "Cookie" in r.headers["Vary"]
    assert _csrf_cookie(client) == before


def test_the_csrf_token_is_one_flask_wtf_accepts(app: Flask, client):
    token = client.get("/auth/csrf").json["csrfToken"]
    cookie = f"{CSRF_COOKIE}={_csrf_cookie(client)}"
    with app.test_request_context(headers={"Cookie": cookie}):
        validate_csrf(token)  # raises if not
    with app.test_request_context(headers={"Cookie": cookie}):
        with pytest.raises(ValidationError):
            validate_csrf(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    # And the sign-in form takes it (Flask-WTF's check, then ours).
    r = client.post("/auth/signin/email", data={"csrfToken": token, "email": "a@example.com"})
    assert r.status_code == 302
    assert "verify-request" in r.headers["Location"]


def test_signatures_derive_their_key_once_with_openssl_s_sha1(monkeypatch):
    """The serializers made once per app keep their signer and its derived key, and sign
    with hashlib's SHA-1 (OpenSSL's HMAC, in one call); what they sign is itsdangerous's
    timed format."""
    derived: list[bytes | str | None] = []
    real = TimestampSigner.derive_key

    def counting(self: TimestampSigner, secret_key: str | bytes | None = None) -> bytes:
        derived.append(secret_key)
        return real(self, secret_key)

    monkeypatch.setattr(TimestampSigner, "derive_key", counting)
    serializer = KeyedOnceSerializer("secret", salt="wtf-csrf-token")
    tokens = [serializer.dumps(f"value {n}") for n in range(3)]
    assert len(derived) == 1
    signer = serializer.make_signer("wtf-csrf-token")
    assert signer.digest_method is hashlib.sha1
    # In one call into OpenSSL, the bytes itsdangerous's own HMAC signs.
    assert type(signer.algorithm).get_signature is not HMACAlgorithm.get_signature
    key = signer.derive_key()
    for value in (b"", b"value", bytes(range(256))):
        expected = HMACAlgorithm(hashlib.sha1).get_signature(key, value)
        assert signer.algorithm.get_signature(key, value) == expected
    plain = URLSafeTimedSerializer("secret", salt="wtf-csrf-token")
    assert [plain.loads(t, max_age=60) for t in tokens] == ["value 0", "value 1", "value 2"]
    assert serializer.loads(plain.dumps("theirs"), max_age=60) == "theirs"
    assert CookieSessionInterface.digest_method is hashlib.sha1


def test_a_cookie_written_by_flasks_own_session_interface_still_reads(app: Flask):
    # Flask's stock interface compresses a payload that shrinks (this one does); ours
    # writes without compression and reads both.
    flashes = [("success", "Passkey added. " * 20)]
    with app.test_request_context():
        stock = SecureCookieSessionInterface().get_signing_serializer(app)
        assert stock is not None
        old_cookie = stock.dumps({"_flashes": flashes, "csrfToken": "a" * 40})
    assert old_cookie.startswith(".")  # compressed
    with app.test_request_context(headers={"Cookie": f"{CSRF_COOKIE}={old_cookie}"}):
        assert session["csrfToken"] == "a" * 40
        assert [tuple(f) for f in session["_flashes"]] == flashes
        session["csrfToken"] = "b" * 40
        response = app.make_response("")
        app.session_interface.save_session(app, session, response)
    new_cookie = response.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    assert not new_cookie.startswith(".")
    with app.test_request_context():
        assert stock.loads(new_cookie)["csrfToken"] == "b" * 40


def test_a_tampered_cookie_is_an_empty_session(app: Flask, client):
    client.get("/auth/csrf")
    value = _csrf_cookie(client)
    forged = value[:-3] + ("xyz" if not value.endswith("xyz") else "abc")
    with app.test_request_context(headers={"Cookie": f"{CSRF_COOKIE}={forged}"}):
        assert dict(session) == {}
    client.set_cookie(CSRF_COOKIE, forged)
    # A new secret is minted, and sent, for a token asked with a forged cookie.
    r = client.get("/auth/csrf")
    assert r.status_code == 200
    assert _csrf_cookie(client) != forged


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "evil.example"], ids=["loopback redirect", "foreign host"]
)
def test_every_answer_carries_one_request_id(make_app, host):
    # In development 127.0.0.1 is sent on to AUTH_URL's localhost; evil.example is refused.
    client = make_app(AUTH_URL="http://localhost:5000/auth").test_client()
    r = client.get("/auth/session", headers={"Host": host})
    assert r.status_code in (307, 400)
    assert len(r.headers.getlist("X-Request-ID")) == 1
    ours = client.get("/auth/session", headers={"Host": "localhost"})
    assert ours.status_code == 200
    assert len(ours.headers.getlist("X-Request-ID")) == 1


@pytest.mark.parametrize(
    "value",
    [
        {"csrfToken": "a" * 40},
        {"csrfToken": "a" * 40, "b": "ünïcode"},
        {" t": "a key named as a tag"},
        {"_flashes": [("success", "Saved.")], "csrfToken": "a" * 40},
        {"n": 1, "raw": b"\x00\xff"},
        {},
    ],
    ids=["one string", "strings", "a tag's name", "flashes", "other types", "empty"],
)
def test_the_session_is_written_as_flasks_tagged_json_writes_it(app: Flask, value):
    ours = CookieSessionInterface.serializer
    with app.app_context():
        written = ours.dumps(value)
        assert written == TaggedJSONSerializer().dumps(value)
        assert ours.loads(written) == TaggedJSONSerializer().loads(written)


@pytest.mark.parametrize(
    ("before", "added", "after"),
    [
        ([], ("Cookie",), "Cookie"),
        (["Accept-Language"], ("Cookie",), "Accept-Language, Cookie"),
        (["Accept-Language, cookie"], ("Cookie", "Accept-Language"), "Accept-Language, cookie"),
        (["Origin", "Accept-Encoding"], ("Cookie",), "Origin, Accept-Encoding, Cookie"),
        (["*"], ("Cookie",), "*"),
    ],
)
def test_vary_gains_what_it_lacks_and_keeps_what_it_names(before, added, after):
    response = Response()
    for value in before:
        response.headers.add("Vary", value)
    add_vary(response, *added)
    assert ", ".join(response.headers.getlist("Vary")) == after
    assert response.vary.as_set() == {h.strip().lower() for h in after.split(",")}


def test_an_emptied_session_is_forgotten_by_the_browser(app: Flask):
    with app.test_request_context(headers={"Cookie": f"{CSRF_COOKIE}=x"}):
        session["csrfToken"] = "a" * 40
        response = app.make_response("")
        app.session_interface.save_session(app, session, response)
        cookie = response.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    with app.test_request_context(headers={"Cookie": f"{CSRF_COOKIE}={cookie}"}):
        session.clear()
        response = app.make_response("")
        app.session_interface.save_session(app, session, response)
    assert response.headers["Set-Cookie"].startswith(f"{CSRF_COOKIE}=;")
    assert "Expires=Thu, 01 Jan 1970" in response.headers["Set-Cookie"]
    assert response.headers["Vary"] == "Cookie"
