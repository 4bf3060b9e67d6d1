"""Credentials sign-in (docs/credentials.md): the authorize hook, database sessions, rate
limits, hooks and signals."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from webapp.core.hooks import (
    AuthHooks,
    UserInfo,
    account_linked,
    session_read,
    signed_in,
    signed_out,
    user_created,
)
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.rows import row_count

USERS = {"ann@example.com": "correct horse battery staple"}


def write_config(tmp_path, body):
    path = tmp_path / "auth.toml"
    path.write_text(body)
    return str(path)


def credentials_app(make_app, tmp_path, hooks=None, **overrides):
    hooks = hooks or AuthHooks()
    if hooks.authorize is None:

        @hooks.authorize_credentials
        def authorize(form):
            email = form["email"].strip().lower()
            if USERS.get(email) == form["password"]:
                return UserInfo(email=email, name="Ann", subject=email)
            return None

    config = write_config(
        tmp_path,
        """
[[providers]]
id = "password"
type = "credentials"
name = "Password"
fields = [
  { name = "email", label = "E-mail", type = "email" },
  { name = "password", label = "Password", type = "password" },
]
""",
    )
    return make_app(AUTH_CONFIG=config, hooks=hooks, **overrides)


def post(client, email, password, **extra):
    token = client.get("/auth/csrf").json["csrfToken"]
    return client.post(
        "/auth/callback/password",
        data={"csrfToken": token, "email": email, "password": password, **extra},
    )


def test_configured_provider_replaces_the_demo(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    providers = app.test_client().get("/auth/providers").json
    assert list(providers) == ["password", "passkey"]  # passkeys: on in development
    assert providers["password"]["type"] == "credentials"


def test_success_creates_user_account_and_database_session(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    client = app.test_client()
    r = post(client, "Ann@Example.com", USERS["ann@example.com"], callbackUrl="/account")
    assert r.status_code == 302 and r.headers["Location"] == "http://localhost/account"
    assert client.get("/auth/session").json["user"] == {
        "name": "Ann",
        "email": "ann@example.com",
        "image": None,
    }
    with app.app_context():
        account = db.session.scalars(sa.select(Account)).one()
        assert (account.provider, account.type, account.provider_account_id) == (
            "password",
            "credentials",
            "ann@example.com",
        )
        session = db.session.scalars(sa.select(Session)).one()
        assert session.provider == "password"
    # A second sign-in reuses the user and account.
    post(client, "ann@example.com", USERS["ann@example.com"])
    assert (row_count(app, User), row_count(app, Account), row_count(app, Session)) == (1, 1, 1)


def test_failure_is_credentials_signin_and_stores_nothing(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    client = app.test_client()
    r = post(client, "ann@example.com", "wrong", callbackUrl="/account")
    assert r.status_code == 302
    assert r.headers["Location"] == (
        "http://localhost/auth/error?error=CredentialsSignin&code=credentials&callbackUrl=%2Faccount"
    )
    r = client.get(r.headers["Location"])
    assert r.headers["Location"] == (
        "http://localhost/auth/signin?error=CredentialsSignin&callbackUrl=%2Faccount"
    )
    assert client.get("/auth/session").json is None
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


def test_failed_attempts_are_limited_per_identifier(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    calls = []
    original = app.extensions["webapp.hooks"].authorize
    app.extensions["webapp.hooks"].authorize = lambda form: calls.append(1) or original(form)
    client = app.test_client()
    with freeze_time("2026-05-01 10:00:00"):
        for _ in range(5):
            r = post(client, "ann@example.com", "wrong")
            assert "CredentialsSignin" in r.headers["Location"]
        # The right password no longer helps, and the hook is not even asked.
        r = post(client, "ann@example.com", USERS["ann@example.com"])
        assert "CredentialsSignin" in r.headers["Location"]
        assert len(calls) == 5
        # Another identifier from the same IP is still checked by the hook.
        post(client, "bob@example.com", "wrong")
        assert len(calls) == 6
    with freeze_time("2026-05-01 10:15:01"):
        r = post(client, "ann@example.com", USERS["ann@example.com"])
        assert r.headers["Location"] == "http://localhost/"


def test_failed_attempts_are_limited_per_ip(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    client = app.test_client()
    with freeze_time("2026-05-01 10:00:00"):
        for i in range(20):
            post(client, f"user{i}@example.com", "wrong")
        r = post(client, "ann@example.com", USERS["ann@example.com"])
        assert "CredentialsSignin" in r.headers["Location"]
        other_ip = app.test_client()
        token = other_ip.get("/auth/csrf").json["csrfToken"]
        r = other_ip.post(
            "/auth/callback/password",
            environ_base={"REMOTE_ADDR": "192.0.2.7"},
            data={
                "csrfToken": token,
                "email": "ann@example.com",
                "password": USERS["ann@example.com"],
            },
        )
        assert r.headers["Location"] == "http://localhost/"


def test_limits_survive_an_app_restart(make_app, tmp_path):
    with freeze_time("2026-05-01 10:00:00"):
        app = credentials_app(make_app, tmp_path)
        for _ in range(5):
            post(app.test_client(), "ann@example.com", "wrong")
        restarted = credentials_app(make_app, tmp_path)
        r = post(restarted.test_client(), "ann@example.com", USERS["ann@example.com"])
        assert "CredentialsSignin" in r.headers["Location"]


def test_signin_hook_can_deny_and_nothing_is_stored(make_app, tmp_path):
    hooks = AuthHooks()
    hooks.on_signin(lambda user, provider, profile: user.email != "ann@example.com")
    app = credentials_app(make_app, tmp_path, hooks=hooks)
    client = app.test_client()
    r = post(client, "ann@example.com", USERS["ann@example.com"])
    assert r.headers["Location"] == "http://localhost/auth/error?error=AccessDenied"
    assert client.get(r.headers["Location"]).status_code == 403
    assert (row_count(app, User), row_count(app, Account), row_count(app, Session)) == (0, 0, 0)


def test_signin_hook_can_redirect_instead(make_app, tmp_path):
    hooks = AuthHooks()
    hooks.on_signin(lambda user, provider, profile: "http://localhost/pending-approval")
    app = credentials_app(make_app, tmp_path, hooks=hooks)
    r = post(app.test_client(), "ann@example.com", USERS["ann@example.com"])
    assert r.headers["Location"] == "http://localhost/pending-approval"
    assert row_count(app, Session) == 0


def test_session_hook_adds_fields(make_app, tmp_path):
    hooks = AuthHooks()
    hooks.on_session(lambda user, session: {"role": "admin", "userId": user.id, "expires": "x"})
    app = credentials_app(make_app, tmp_path, hooks=hooks)
    client = app.test_client()
    post(client, "ann@example.com", USERS["ann@example.com"])
    body = client.get("/auth/session").json
    assert body["role"] == "admin" and isinstance(body["userId"], int)
    assert body["expires"] != "x"  # the contract's fields cannot be overwritten
    assert body["user"]["email"] == "ann@example.com"


def test_signals_are_sent(make_app, tmp_path):
    app = credentials_app(make_app, tmp_path)
    got = []
    receivers = {
        "user_created": lambda _, **kw: got.append(("user_created", kw["user"].email)),
        "account_linked": lambda _, **kw: got.append(("account_linked", kw["account"].provider)),
        "signed_in": lambda _, **kw: got.append(("signed_in", kw["provider"], kw["is_new_user"])),
        "session_read": lambda _, **kw: got.append(("session_read", kw["user"].email)),
        "signed_out": lambda _, **kw: got.append(("signed_out", type(kw["session_id"]).__name__)),
    }
    signals = {
        "user_created": user_created,
        "account_linked": account_linked,
        "signed_in": signed_in,
        "session_read": session_read,
        "signed_out": signed_out,
    }
    for name, fn in receivers.items():
        signals[name].connect(fn)
    try:
        client = app.test_client()
        post(client, "ann@example.com", USERS["ann@example.com"])
        client.get("/auth/session")
        token = client.get("/auth/csrf").json["csrfToken"]
        client.post("/auth/signout", data={"csrfToken": token})
    finally:
        for name, fn in receivers.items():
            signals[name].disconnect(fn)
    assert got == [
        ("user_created", "ann@example.com"),
        ("account_linked", "password"),
        ("signed_in", "password", True),
        ("session_read", "ann@example.com"),
        ("signed_out", "int"),
    ]


def test_missing_hook_is_a_configuration_error(make_app, tmp_path):
    config = write_config(tmp_path, '[[providers]]\nid = "pw"\ntype = "credentials"\n')
    app = make_app(AUTH_CONFIG=config)
    client = app.test_client()
    token = client.get("/auth/csrf").json["csrfToken"]
    r = client.post(
        "/auth/callback/pw", data={"csrfToken": token, "email": "a@b.c", "password": "x"}
    )
    assert r.headers["Location"] == "http://localhost/auth/error?error=Configuration"
    assert client.get(r.headers["Location"]).status_code == 500


def test_demo_password_is_the_only_one_the_demo_accepts(client, auth):
    r = auth.signin("ann@example.com", password="Demo")
    assert "CredentialsSignin" in r.headers["Location"]
    r = auth.signin("not-an-address", password="demo")
    assert "CredentialsSignin" in r.headers["Location"]
    r = auth.signin("ann@example.com", password="demo")
    assert r.headers["Location"] == "http://localhost/"


@pytest.mark.parametrize(
    "address",
    [
        "ann@example.com\r\nBcc: evil@example.com",
        "ann@example.com, evil@example.com",
        "Ann <ann@example.com>",
        "ann@example.com\x00",
        "ann\u202e@example.com",
        "a" * 300 + "@example.com",
    ],
)
def test_an_address_the_hook_vouches_for_still_goes_through_the_normaliser(
    make_app, tmp_path, address
):
    # The application's hook is a source like any other: an address we would not accept
    # from a person fails the sign-in with the provider's code and writes nothing (a user
    # row holding it would later become a mail header).
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form):
        return UserInfo(email=address, name="Ann", subject="ann-1", email_verified=True)

    app = credentials_app(make_app, tmp_path, hooks=hooks)
    client = app.test_client()
    r = post(client, "ann@example.com", "right")
    assert r.headers["Location"].startswith("http://localhost/auth/error?error=CredentialsSignin")
    assert (row_count(app, User), row_count(app, Session), row_count(app, Account)) == (0, 0, 0)


def test_the_hooks_address_is_stored_in_the_normal_form(make_app, tmp_path):
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form):
        return UserInfo(email="  Ann@EXAMPLE.com ", subject="ann-1", email_verified=True)

    app = credentials_app(make_app, tmp_path, hooks=hooks)
    r = post(app.test_client(), "ann@example.com", "right")
    assert r.headers["Location"] == "http://localhost/"
    with app.app_context():
        assert [u.email for u in User.query.all()] == ["ann@example.com"]
