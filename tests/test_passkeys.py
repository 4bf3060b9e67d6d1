"""Passkeys over HTTP: the options and their challenge cookie, adding a passkey (signed in,
recently), signing in with it like any other callback, every refusal with nothing
written, and the account page's list, rename and remove.

The authenticator is tests/support/passkey_authenticator.py, a software stand-in that builds
the bytes a real one would; the browser suite drives Chromium's virtual authenticator.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import (
    Account,
    Authenticator,
    Session,
    SpentChallenge,
    TotpAuthenticator,
    User,
)

from .support.passkey_authenticator import SoftAuthenticator, b64url
from .support.passkey_ceremonies import CALLBACK, JSON_ANSWER, OPTIONS, Passkeys
from .support.rows import row_count
from .support.signin import DEMO_EMAIL, AuthActions

HTMX = {"HX-Request": "true"}
# JSON mode: a sign-in code names the sign-in page at once (docs/routes.md, "JSON mode").
REFUSED = "http://localhost/auth/signin?error=PasskeySignin"


@pytest.fixture
def passkeys(client: FlaskClient) -> Passkeys:
    return Passkeys(client)


@pytest.fixture
def registered(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> Iterator[Passkeys]:
    """Ann signed in with the demo credentials, added a passkey, and signed out again."""
    auth.signin()
    answer = passkeys.register()
    assert answer.status_code == 200 and answer.json["url"] == "http://localhost/account#passkeys"
    auth.signout()
    assert auth.session_cookie() is None
    yield passkeys


def _passkey(app: Flask) -> Authenticator:
    with app.app_context():
        row = db.session.execute(sa.select(Authenticator)).scalar_one()
        db.session.expunge(row)
        return row


def _sessions(app: Flask) -> list[Session]:
    with app.app_context():
        rows = list(db.session.scalars(sa.select(Session)))
        for row in rows:
            db.session.expunge(row)
        return rows


def _user_id(app: Flask, email: str = DEMO_EMAIL) -> int:
    with app.app_context():
        return int(db.session.execute(sa.select(User.id).where(User.email == email)).scalar_one())


# -- the provider and the options ------------------------------------------------------


def test_providers_list_the_passkey_provider_when_it_is_on(make_app) -> None:
    on = make_app().test_client().get("/auth/providers").json
    assert on["passkey"] == {
        "id": "passkey",
        "name": "Passkey",
        "type": "webauthn",
        "signinUrl": "http://localhost/auth/signin/passkey",
        "callbackUrl": "http://localhost/auth/callback/passkey",
    }
    off = make_app(AUTH_PASSKEYS="false").test_client()
    assert "passkey" not in off.get("/auth/providers").json
    assert off.get(f"{OPTIONS}?action=authenticate").status_code == 404
    assert (
        off.post(CALLBACK, data={"action": "authenticate"})
        .headers["Location"]
        .endswith("/auth/error?error=Signin")
    )


def test_authenticate_options_and_their_sealed_cookie(client: FlaskClient) -> None:
    r = client.get(f"{OPTIONS}?action=authenticate")
    assert r.status_code == 200
    options = r.json["options"]
    assert r.json["action"] == "authenticate"
    assert options["rpId"] == "localhost"
    assert options["allowCredentials"] == []  # discoverable credentials
    assert options["userVerification"] == "preferred"
    assert len(options["challenge"]) >= 43  # 32 random bytes
    (cookie,) = r.headers.getlist("Set-Cookie")
    assert cookie.startswith("auth.passkey-challenge=")
    assert "HttpOnly" in cookie and "Max-Age=900" in cookie and "Path=/auth" in cookie
    assert "SameSite=Lax" in cookie
    # Sealed: the challenge is not readable in it.
    assert options["challenge"] not in cookie
    assert r.headers["Cache-Control"].startswith("private, no-cache, no-store")
    # Each request gets its own challenge.
    assert (
        client.get(f"{OPTIONS}?action=authenticate").json["options"]["challenge"]
        != (options["challenge"])
    )


def test_an_unknown_action_or_provider_is_refused(client: FlaskClient, auth: AuthActions) -> None:
    r = client.get(f"{OPTIONS}?action=delete")
    assert (r.status_code, r.json) == (400, {"error": "Invalid action"})
    assert client.get_cookie("auth.passkey-challenge", path="/auth") is None
    r = client.get("/auth/webauthn-options/demo?action=authenticate")
    assert r.status_code == 404 and r.json["error"] == "Not Found"
    # Without an action a signed-out browser authenticates, as in Auth.js; signed in, it must say.
    assert client.get(OPTIONS).json["action"] == "authenticate"
    auth.signin()
    assert client.get(OPTIONS).status_code == 400


def test_register_options_need_a_session(client: FlaskClient) -> None:
    r = client.get(f"{OPTIONS}?action=register")
    assert (r.status_code, r.json) == (401, {"error": "SessionRequired"})
    assert client.get_cookie("auth.passkey-challenge", path="/auth") is None


def test_register_options_need_a_recent_sign_in(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> None:
    start = utcnow()
    with freeze_time(start):
        auth.signin()
        response = passkeys.authenticator.register(passkeys.options("register"))
    with freeze_time(start + timedelta(minutes=11)):
        r = client.get(f"{OPTIONS}?action=register")
        assert r.status_code == 403
        assert r.json == {
            "error": "RecentSignInRequired",
            "url": "http://localhost/account/confirm?next=%2Faccount%23passkeys",
        }
        # An answer to options fetched while it was recent is refused too, and adds nothing.
        answer = passkeys.post("register", response)
        assert answer.status_code == 403
        assert answer.json["error"] == "RecentSignInRequired"
    assert row_count(app, Authenticator) == 0


def test_register_options(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> None:
    auth.signin()
    options = passkeys.options("register")
    assert options["rp"] == {"name": "Webapp", "id": "localhost"}
    assert options["user"]["name"] == DEMO_EMAIL
    handle = options["user"]["id"]
    # 16 opaque bytes: neither the user id nor the address.
    assert len(handle) == 22 and str(_user_id(app)) != handle and "ann" not in handle
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert options["authenticatorSelection"]["userVerification"] == "preferred"
    assert options["attestation"] == "none"
    assert {"type": "public-key", "alg": -7} in options["pubKeyCredParams"]
    assert options["excludeCredentials"] == []
    assert passkeys.register().status_code == 200
    # The same person's handle stays the same; the passkey just added is excluded.
    again = passkeys.options("register")
    assert again["user"]["id"] == handle
    assert again["excludeCredentials"] == [
        {
            "id": _passkey(app).credential_id,
            "type": "public-key",
            "transports": ["hybrid", "internal"],
        }
    ]


# -- adding a passkey and signing in with it -------------------------------------------


def test_register_then_sign_in(app: Flask, client: FlaskClient, registered: Passkeys) -> None:
    row = _passkey(app)
    assert row.user_id == _user_id(app)
    assert row.name == "Passkey"  # no name given, no known provider
    assert row.sign_count == 0 and row.last_used_at is None
    assert (row.device_type, row.backed_up, row.aaguid) == ("single_device", False, None)
    assert row.transports == "hybrid internal"

    url = registered.sign_in()
    assert url == "http://localhost/"
    (session,) = _sessions(app)
    assert session.user_id == row.user_id and session.provider == "passkey"
    assert session.amr == "hwk user mfa"  # verified: both factors
    assert client.get_cookie("auth.session-token") is not None
    assert client.get("/auth/session").json["user"]["email"] == DEMO_EMAIL
    after = _passkey(app)
    assert after.sign_count == 1 and after.last_used_at is not None
    assert registered.challenge_cookie() is None  # spent and cleared


def test_a_passkey_without_user_verification_is_one_factor(
    app: Flask, registered: Passkeys
) -> None:
    registered.sign_in(uv=False)
    (session,) = _sessions(app)
    assert session.amr == "hwk"


def test_sign_in_follows_the_callback_url_rules(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    for wanted, expected in [
        ("/account", "http://localhost/account"),
        ("https://evil.example/", "http://localhost/"),
    ]:
        response = registered.authenticator.authenticate(registered.options("authenticate"))
        answer = registered.post("authenticate", response, callbackUrl=wanted)
        assert answer.json["url"] == expected
    # Each sign-in replaced this browser's previous session.
    assert len(_sessions(app)) == 1


def test_a_plain_form_post_is_redirected(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    response = registered.authenticator.authenticate(registered.options("authenticate"))
    csrf = client.get("/auth/csrf").json["csrfToken"]
    r = client.post(
        CALLBACK, data={"csrfToken": csrf, "action": "authenticate", "data": json.dumps(response)}
    )
    assert (r.status_code, r.headers["Location"]) == (302, "http://localhost/")


def test_the_name_is_the_persons_or_the_providers(
    app: Flask, client: FlaskClient, auth: AuthActions
) -> None:
    auth.signin()
    one_password = SoftAuthenticator(
        aaguid=bytes.fromhex("bada5566a7aa401fbd9645619a55120d"), backed_up=True
    )
    Passkeys(client, one_password).register()
    Passkeys(client, SoftAuthenticator()).register(name="  Work <laptop>  ")
    with app.app_context():
        rows = db.session.execute(
            sa.select(
                Authenticator.name,
                Authenticator.aaguid,
                Authenticator.backed_up,
                Authenticator.device_type,
            ).order_by(Authenticator.id)
        ).all()
    assert [tuple(r) for r in rows] == [
        ("1Password", "bada5566-a7aa-401f-bd96-45619a55120d", True, "multi_device"),
        ("Work <laptop>", None, False, "single_device"),
    ]
    # "Recent activity" names each as it is called, isolated and escaped.
    page = client.get("/account").get_data(as_text=True)
    assert "Passkey “<bdi>Work &lt;laptop&gt;</bdi>” added" in page
    assert "Passkey “<bdi>1Password</bdi>” added" in page


@pytest.mark.parametrize("name", ["x" * 65, "tab\tname"])
def test_a_bad_name_adds_nothing(
    app: Flask, auth: AuthActions, passkeys: Passkeys, name: str
) -> None:
    auth.signin()
    answer = passkeys.register(name=name)
    assert answer.status_code == 400 and answer.json["error"] == "InvalidName"
    assert row_count(app, Authenticator) == 0


def test_no_passkey_sign_up_for_strangers(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> None:
    auth.signin()
    response = passkeys.authenticator.register(passkeys.options("register"))
    auth.signout()
    answer = passkeys.post("register", response)
    assert answer.json == {"url": "http://localhost/auth/signin?error=SessionRequired"}
    assert row_count(app, Authenticator) == 0


def test_a_registration_challenge_is_the_users(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> None:
    """Options fetched as Ann cannot add a passkey to Bob, who signs in in the same browser."""
    auth.signin()
    response = passkeys.authenticator.register(passkeys.options("register"))
    auth.signin("bob@example.com")
    answer = passkeys.post("register", response)
    assert answer.status_code == 400 and answer.json["error"] == "PasskeyNotAdded"
    assert row_count(app, Authenticator) == 0


@pytest.mark.parametrize(
    "bend",
    [{"origin": "http://evil.example"}, {"rp_id": "evil.example"}, {"kind": "webauthn.get"}],
    ids=["wrong origin", "wrong RP ID", "wrong type"],
)
def test_a_bad_registration_adds_nothing(
    app: Flask, auth: AuthActions, passkeys: Passkeys, bend: dict[str, str]
) -> None:
    auth.signin()
    answer = passkeys.register(**bend)
    assert answer.status_code == 400 and answer.json["error"] == "PasskeyNotAdded"
    assert row_count(app, Authenticator) == 0


def test_a_registration_answer_counts_once(
    app: Flask, client: FlaskClient, auth: AuthActions, passkeys: Passkeys
) -> None:
    auth.signin()
    response = passkeys.authenticator.register(passkeys.options("register"))
    cookie = passkeys.challenge_cookie()
    assert passkeys.post("register", response).status_code == 200
    client.set_cookie("auth.passkey-challenge", cookie, path="/auth")
    again = passkeys.post("register", response)
    assert again.status_code == 400 and again.json["error"] == "PasskeyNotAdded"
    assert row_count(app, Authenticator) == 1


# -- refusals: nothing written ------------------------------------------------------------


def _nothing_written(app: Flask, before: Authenticator) -> None:
    assert _sessions(app) == []
    after = _passkey(app)
    assert (after.sign_count, after.last_used_at, after.backed_up) == (
        before.sign_count,
        before.last_used_at,
        before.backed_up,
    )


@pytest.mark.parametrize(
    "bend",
    [
        {"origin": "http://evil.example"},
        {"origin": "https://localhost"},
        {"rp_id": "evil.example"},
        {"kind": "webauthn.create"},
    ],
    ids=["wrong origin", "wrong scheme", "wrong RP ID", "wrong type"],
)
def test_a_bent_assertion_is_refused(
    app: Flask, registered: Passkeys, bend: dict[str, str]
) -> None:
    before = _passkey(app)
    assert registered.sign_in(**bend) == REFUSED
    _nothing_written(app, before)


def test_a_replayed_assertion_is_refused(
    app: Flask, client: FlaskClient, auth: AuthActions
) -> None:
    # A synced passkey that keeps no counter: only the challenge stops a replay.
    synced = Passkeys(client, SoftAuthenticator(counts=False, backed_up=True))
    auth.signin()
    synced.register()
    auth.signout()
    response = synced.authenticator.authenticate(synced.options("authenticate"))
    cookie = synced.challenge_cookie()
    assert synced.post("authenticate", response).json["url"] == "http://localhost/"
    (first,) = _sessions(app)
    client.delete_cookie("auth.session-token")
    # With a fresh challenge: it signed another one.
    synced.options("authenticate")
    assert synced.post("authenticate", response).json["url"] == REFUSED
    # With its own challenge's cookie, copied: spent.
    client.set_cookie("auth.passkey-challenge", cookie, path="/auth")
    assert synced.post("authenticate", response).json["url"] == REFUSED
    # Without any challenge.
    assert synced.post("authenticate", response).json["url"] == REFUSED
    assert [s.id for s in _sessions(app)] == [first.id]


def test_a_refused_answer_spends_its_challenge(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    options = registered.options("authenticate")
    cookie = registered.challenge_cookie()
    bad = registered.authenticator.authenticate(options, origin="http://evil.example")
    assert registered.post("authenticate", bad).json["url"] == REFUSED
    assert row_count(app, SpentChallenge) == 2  # the registration's, and this one
    good = registered.authenticator.authenticate(options)
    client.set_cookie("auth.passkey-challenge", cookie, path="/auth")
    assert registered.post("authenticate", good).json["url"] == REFUSED
    assert _sessions(app) == []


def test_a_stale_challenge_is_refused(app: Flask, registered: Passkeys) -> None:
    before = _passkey(app)
    start = utcnow()
    with freeze_time(start):
        options = registered.options("authenticate")
    with freeze_time(start + timedelta(seconds=901)):
        response = registered.authenticator.authenticate(options)
        assert registered.post("authenticate", response).json["url"] == REFUSED
    _nothing_written(app, before)


def test_a_registration_challenge_does_not_sign_in(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys
) -> None:
    auth.signin()
    options = registered.options("register")
    auth.signout()
    before = _passkey(app)
    response = registered.authenticator.authenticate(
        {"rpId": "localhost", "challenge": options["challenge"]}
    )
    assert registered.post("authenticate", response).json["url"] == REFUSED
    _nothing_written(app, before)


@pytest.mark.parametrize("count", [0, 1, 2], ids=["reset", "repeated", "lowered"])
def test_a_counter_that_goes_back_is_refused_and_logged(
    app: Flask,
    registered: Passkeys,
    caplog: pytest.LogCaptureFixture,
    client: FlaskClient,
    count: int,
) -> None:
    registered.sign_in(sign_count=2)
    client.delete_cookie("auth.session-token")
    with app.app_context():
        db.session.execute(sa.delete(Session))
        db.session.commit()
    before = _passkey(app)
    assert before.sign_count == 2
    with caplog.at_level(logging.WARNING, logger="webapp.flows.signin.passkey"):
        assert registered.sign_in(sign_count=count) == REFUSED
    _nothing_written(app, before)
    (warning,) = [r for r in caplog.records if "possible cloned authenticator" in r.getMessage()]
    assert f"passkey {before.id} " in warning.getMessage()


def test_an_authenticator_without_a_counter_signs_in_again_and_again(
    app: Flask, auth: AuthActions, client: FlaskClient
) -> None:
    synced = Passkeys(client, SoftAuthenticator(counts=False, backed_up=True))
    auth.signin()
    synced.register()
    auth.signout()
    for _ in range(2):
        assert synced.sign_in() == "http://localhost/"
    assert _passkey(app).sign_count == 0


def test_an_unknown_passkey_is_refused(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    before = _passkey(app)
    stranger = Passkeys(client, SoftAuthenticator())
    # A passkey made for this site's options, but never registered here.
    stranger.authenticator.register(
        {"rp": {"id": "localhost"}, "user": {"id": b64url(b"x")}, "challenge": "AA"}
    )
    assert stranger.sign_in() == REFUSED
    _nothing_written(app, before)


def test_a_deleted_users_passkey_is_refused(app: Flask, registered: Passkeys) -> None:
    with app.app_context():
        db.session.execute(sa.delete(Account))
        db.session.execute(sa.delete(User))
        db.session.commit()
    assert registered.sign_in() == REFUSED
    assert _sessions(app) == []
    assert row_count(app, User) == 0


@pytest.mark.parametrize(
    "data",
    [
        "",
        "not json",
        "[1, 2]",
        json.dumps({"id": "abc"}),
        json.dumps({"id": "!!", "rawId": "!!", "type": "public-key", "response": {}}),
        json.dumps({"id": "a" * 20000}),
        json.dumps({"id": 5, "response": None}),
    ],
    ids=["empty", "not JSON", "not an object", "no response", "bad id", "huge", "wrong types"],
)
def test_malformed_data_is_a_clean_refusal(
    app: Flask, client: FlaskClient, registered: Passkeys, data: str
) -> None:
    before = _passkey(app)
    registered.options("authenticate")
    answer = registered.post("authenticate", data)
    assert answer.status_code == 200 and answer.json["url"] == REFUSED
    _nothing_written(app, before)
    assert registered.challenge_cookie() is None  # spent all the same
    # Plain form posts land on the sign-in page with the message.
    page = client.get("/auth/signin?error=PasskeySignin").get_data(as_text=True)
    assert "Passkey sign-in failed" in page


def test_a_tampered_signature_is_refused(app: Flask, registered: Passkeys) -> None:
    before = _passkey(app)
    response = registered.authenticator.authenticate(registered.options("authenticate"))
    signature = bytearray(response["response"]["signature"].encode())
    signature[-3] = ord("A") if signature[-3] != ord("A") else ord("B")
    response["response"]["signature"] = signature.decode()
    assert registered.post("authenticate", response).json["url"] == REFUSED
    _nothing_written(app, before)


def test_the_callback_needs_the_csrf_token(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    response = registered.authenticator.authenticate(registered.options("authenticate"))
    r = client.post(
        CALLBACK, data={"action": "authenticate", "data": json.dumps(response)}, headers=JSON_ANSWER
    )
    assert r.status_code == 200
    assert r.json == {"url": "http://localhost/auth/signin?error=MissingCSRF"}
    assert registered.challenge_cookie() is not None  # not spent: nothing was tried
    assert _sessions(app) == []


def test_unknown_callback_actions_and_gets_are_refused(
    client: FlaskClient, registered: Passkeys
) -> None:
    assert registered.post("delete", "{}").json["url"] == REFUSED
    assert (
        client.get(CALLBACK).headers["Location"]
        == "http://localhost/auth/error?error=PasskeySignin"
    )
    csrf = client.get("/auth/csrf").json["csrfToken"]
    r = client.post("/auth/signin/passkey", data={"csrfToken": csrf})
    assert r.headers["Location"].endswith("/auth/error?error=PasskeySignin")


# -- second factor -------------------------------------------------------------------


@pytest.fixture
def with_app_code(app: Flask) -> None:
    """Ann has an authenticator app (a second factor): her sign-ins wait for it."""
    with app.app_context():
        user_id = db.session.execute(
            sa.select(User.id).where(User.email == DEMO_EMAIL)
        ).scalar_one()
        db.session.add(
            TotpAuthenticator(
                user_id=user_id, secret=None, confirmed_at=utcnow(), created_at=utcnow()
            )
        )
        db.session.commit()


def test_a_verified_passkey_is_both_factors(
    app: Flask, registered: Passkeys, with_app_code: None
) -> None:
    assert registered.sign_in() == "http://localhost/"
    (session,) = _sessions(app)
    assert "mfa" in session.amr.split()


def test_an_unverified_passkey_waits_for_the_second_factor(
    app: Flask, registered: Passkeys, with_app_code: None
) -> None:
    assert registered.sign_in(uv=False) == "http://localhost/auth/second-factor"
    assert _sessions(app) == []


def test_a_passkey_passes_a_held_sign_in(
    app: Flask, auth: AuthActions, registered: Passkeys, with_app_code: None
) -> None:
    r = auth.signin(callbackUrl="/account")
    assert r.headers["Location"] == "http://localhost/auth/second-factor"
    assert _sessions(app) == []
    # Any passkey of hers passes it, verified or not, and the held callbackUrl is kept.
    assert registered.sign_in(uv=False) == "http://localhost/account"
    (session,) = _sessions(app)
    assert session.provider == "demo"
    assert {"hwk", "mfa"} <= set(session.amr.split())


def test_an_unverified_passkey_cannot_also_be_the_second_factor(
    app: Flask, registered: Passkeys, with_app_code: None
) -> None:
    # One passkey without user verification is one factor: using it again at the gate
    # must not make two (a security key with no PIN would pass two-step verification).
    assert registered.sign_in(uv=False) == "http://localhost/auth/second-factor"
    assert registered.sign_in(uv=False) == (
        "http://localhost/auth/signin?error=SecondFactorPasskey"
    )
    assert _sessions(app) == []


# -- the account page ----------------------------------------------------------------


def test_the_account_page_lists_passkeys(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys
) -> None:
    registered.sign_in()
    page = client.get("/account").get_data(as_text=True)
    section = page[page.index('<section id="passkeys"') :]
    section = section[: section.index("</section>")]
    assert "<strong>Passkey</strong>" in section
    assert "this device only" in section and "last used" in section
    # The "Add a passkey" form waits for the script; without it there is nothing to press.
    assert re.search(r'<form class="stack narrow" data-passkey="register" hidden>', section)
    assert "Adding a passkey needs JavaScript." in section
    assert 'id="passkey-data"' in page


def test_a_passkey_can_be_renamed(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys
) -> None:
    auth.signin()
    passkey_id = _passkey(app).id
    csrf = auth.csrf()
    r = client.post(
        f"/account/passkeys/{passkey_id}/rename",
        data={"csrfToken": csrf, "name": "  MacBook  "},
        headers=HTMX,
    )
    html = r.get_data(as_text=True)
    assert r.status_code == 200 and html.lstrip().startswith('<section id="passkeys"')
    assert "The passkey is now called “MacBook”." in html
    assert _passkey(app).name == "MacBook"
    for bad in ["", "   ", "x" * 65]:
        r = client.post(
            f"/account/passkeys/{passkey_id}/rename",
            data={"csrfToken": csrf, "name": bad},
            headers=HTMX,
        )
        assert "A name needs 1 to 64 characters" in r.get_data(as_text=True)
    assert _passkey(app).name == "MacBook"
    r = client.post(f"/account/passkeys/{passkey_id}/rename", data={"name": "No token"})
    assert _passkey(app).name == "MacBook"


def test_another_users_passkey_is_not_found(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    passkey_id = _passkey(app).id
    bob = AuthActions(app.test_client())
    bob.signin("bob@example.com")
    for action, form in [("rename", {"name": "Mine"}), ("remove", {})]:
        r = bob.client.post(
            f"/account/passkeys/{passkey_id}/{action}",
            data={"csrfToken": bob.csrf(), **form},
            headers=HTMX,
        )
        assert "not (or no longer) part of your account" in r.get_data(as_text=True)
    assert _passkey(app).name == "Passkey"


def test_removing_a_passkey_needs_a_recent_sign_in(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys
) -> None:
    start = utcnow()
    with freeze_time(start):
        auth.signin()
    passkey_id = _passkey(app).id
    with freeze_time(start + timedelta(minutes=11)):
        r = client.post(f"/account/passkeys/{passkey_id}/remove", data={"csrfToken": auth.csrf()})
        assert r.status_code == 303
        # Back, after confirming, to the step page that asks before removing it.
        assert r.headers["Location"] == (
            f"/account/confirm?next=%2Faccount%2Fpasskeys%2F{passkey_id}%2Fremove"
        )
    assert row_count(app, Authenticator) == 1
    r = client.post(
        f"/account/passkeys/{passkey_id}/remove", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert row_count(app, Authenticator) == 0


@pytest.fixture
def without_email(app: Flask) -> None:
    app.extensions["webapp.providers"].pop("email", None)


def test_a_passkey_and_a_provider_are_each_others_way_in(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys, without_email: None
) -> None:
    registered.sign_in()
    user_id = _user_id(app)
    with app.app_context():
        (account_id,) = db.session.scalars(sa.select(Account.id).where(Account.user_id == user_id))
    csrf = auth.csrf()
    # The demo account can go: the passkey remains a way in.
    r = client.post(
        f"/account/accounts/{account_id}/unlink", data={"csrfToken": csrf}, headers=HTMX
    )
    assert "was removed" in r.get_data(as_text=True)
    assert row_count(app, Account) == 0
    # Now the passkey is the last way in: it cannot go.
    page = client.get("/account").get_data(as_text=True)
    assert "/remove" not in page and "This passkey is your only way to sign in" in page
    passkey_id = _passkey(app).id
    r = client.post(
        f"/account/passkeys/{passkey_id}/remove", data={"csrfToken": csrf}, headers=HTMX
    )
    assert "is your only way to sign in, so it cannot be removed" in r.get_data(as_text=True)
    assert row_count(app, Authenticator) == 1


def test_a_second_passkey_lets_the_first_go(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys, without_email: None
) -> None:
    auth.signin()
    Passkeys(client, SoftAuthenticator()).register(name="Phone")
    with app.app_context():
        db.session.execute(sa.delete(Account))
        db.session.commit()
        first = (
            db.session.execute(sa.select(Authenticator.id).order_by(Authenticator.id))
            .scalars()
            .first()
        )
    r = client.post(
        f"/account/passkeys/{first}/remove", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert "was removed; it no longer signs you in" in r.get_data(as_text=True)
    assert row_count(app, Authenticator) == 1


def test_deleting_the_account_deletes_its_passkeys(
    app: Flask, client: FlaskClient, auth: AuthActions, registered: Passkeys
) -> None:
    auth.signin()
    r = client.post("/account/delete", data={"csrfToken": auth.csrf(), "confirm": "DELETE"})
    assert r.status_code == 303
    assert row_count(app, Authenticator) == 0


# -- an address where passkeys cannot work, and cleanup ------------------------------------


def test_an_ip_address_host_offers_no_passkeys(make_app) -> None:
    client = make_app(AUTH_URL="http://127.0.0.1:5000/auth").test_client()
    r = client.get(f"{OPTIONS}?action=authenticate", base_url="http://127.0.0.1:5000")
    assert (r.status_code, r.json) == (400, {"error": "PasskeysUnavailable"})
    html = client.get("/auth/signin", base_url="http://127.0.0.1:5000").get_data(as_text=True)
    data = json.loads(re.search(r'id="chooser-data">(.*?)</script>', html, re.S)[1])
    assert data["passkeyProblem"] == (
        "Passkeys need a domain name: start with AUTH_URL=http://localhost:5000/auth "
        "and open http://localhost:5000"
    )


def test_cleanup_deletes_only_expired_spent_challenges(
    app: Flask, client: FlaskClient, registered: Passkeys
) -> None:
    start = utcnow()
    with freeze_time(start):
        registered.sign_in()
    with freeze_time(start + timedelta(seconds=600)):
        registered.sign_in()
    assert row_count(app, SpentChallenge) == 3  # the registration's and two sign-ins'
    with freeze_time(start + timedelta(seconds=901)):
        result = app.test_cli_runner().invoke(args=["auth", "cleanup"])
    assert "deleted 2 spent passkey challenge(s)" in result.output
    assert row_count(app, SpentChallenge) == 1


def test_a_parent_domain_as_rp_id(make_app) -> None:
    """AUTH_PASSKEY_RP_ID: passkeys registered for the parent domain, answers from this site."""
    app = make_app(AUTH_URL="https://login.example.com/auth", AUTH_PASSKEY_RP_ID="example.com")
    client = app.test_client()
    base = "https://login.example.com"
    auth = AuthActions(client)
    auth.signin(base_url=base)
    options = client.get(f"{OPTIONS}?action=register", base_url=base).json["options"]
    assert options["rp"]["id"] == "example.com"
    authenticator = SoftAuthenticator(origin=base)
    csrf = client.get("/auth/csrf", base_url=base).json["csrfToken"]
    form = {
        "csrfToken": csrf,
        "action": "register",
        "data": json.dumps(authenticator.register(options)),
    }
    r = client.post(CALLBACK, data=form, headers=JSON_ANSWER, base_url=base)
    assert r.json == {"url": f"{base}/account#passkeys"}
    options = client.get(f"{OPTIONS}?action=authenticate", base_url=base).json["options"]
    assert options["rpId"] == "example.com"
    # Signed for the site's own host instead: refused.
    wrong = authenticator.authenticate(options, rp_id="login.example.com")
    form = {"csrfToken": csrf, "action": "authenticate", "data": json.dumps(wrong)}
    r = client.post(CALLBACK, data=form, headers=JSON_ANSWER, base_url=base)
    assert r.json["url"] == f"{base}/auth/signin?error=PasskeySignin"
    options = client.get(f"{OPTIONS}?action=authenticate", base_url=base).json["options"]
    form["data"] = json.dumps(authenticator.authenticate(options))
    r = client.post(CALLBACK, data=form, headers=JSON_ANSWER, base_url=base)
    assert r.json["url"] == f"{base}/"
