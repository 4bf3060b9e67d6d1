"""No pre-hijacked accounts: an unverified address is never identity.

Driven over HTTP as an attacker would: a provider that does not verify addresses (the
real oidc-provider's ``mallory`` claims ann@example.com with ``email_verified: false``),
or a credentials hook whose sign-up does not verify them, then the victim proving her
address by e-mail link. The rule table is in docs/security.md, "Account linking".
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from flask_migrate import downgrade, upgrade

from webapp import MIGRATIONS_DIR, create_app
from webapp.core.hooks import AuthHooks, UserInfo
from webapp.errors import AuthError
from webapp.flows.signin.identity import MAX_PICTURE_URL, picture_url, resolve_user
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.config import base_config
from .support.mail import EmailActions, Mailbox, link_of
from .support.oauth import APP_ORIGIN, Browser, FakeIdP, email_sign_in, error_of, fake_idp
from .support.signin import demo_sign_in

ANN = "ann@example.com"
PASSWORD = "attacker's own password"


def user_of(app: Flask, provider: str, subject: str) -> User:
    with app.app_context():
        user = db.session.execute(
            sa.select(User)
            .join(Account)
            .where(Account.provider == provider, Account.provider_account_id == subject)
        ).scalar_one()
        db.session.expunge_all()
        return user


def users(app: Flask) -> list[User]:
    with app.app_context():
        found = list(db.session.execute(sa.select(User).order_by(User.id)).scalars())
        db.session.expunge_all()
        return found


def session_user_ids(app: Flask) -> list[int]:
    with app.app_context():
        return list(db.session.execute(sa.select(Session.user_id).order_by(Session.id)).scalars())


def session_of(client: FlaskClient) -> dict[str, Any] | None:
    body = client.get("/auth/session").json
    return body or None


def assert_attacker_sees_only_himself(
    app: Flask, attacker: FlaskClient, attacker_id: int, ann_id: int
) -> None:
    """His cookie, his session JSON and his account area show his user, none of hers."""
    assert attacker_id != ann_id
    session = session_of(attacker)
    assert session is not None and session["user"]["email"] is None
    overview = attacker.get("/account/api").json
    assert overview["user"]["email"] is None
    with app.app_context():
        hers = set(
            db.session.execute(sa.select(Session.id).where(Session.user_id == ann_id)).scalars()
        )
        his = set(
            db.session.execute(
                sa.select(Session.id).where(Session.user_id == attacker_id)
            ).scalars()
        )
    assert hers and {s["id"] for s in overview["sessions"]} == his
    assert ANN not in attacker.get("/account").get_data(as_text=True)


# -- the attack: pre-hijacking through an unverified claim -----------------------------


def test_provider_without_verification_cannot_pre_hijack(
    node_op: Any, make_oauth_app: Any, mailbox: Mailbox
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")], EMAIL_SERVER=mailbox.url())
    attacker = Browser(app.test_client())
    assert error_of(attacker.sign_in("op-basic", login_hint="mallory")) is None
    [claimant] = users(app)
    assert (claimant.email, claimant.email_verified) == (ANN, None)

    ann = app.test_client()
    email_sign_in(ann, mailbox, ANN)
    ann_user = user_of(app, "email", ANN)
    attacker_user = user_of(app, "op-basic", "mallory")
    assert ann_user.id != attacker_user.id == claimant.id
    assert ann_user.email == ANN and ann_user.email_verified is not None
    assert session_of(ann)["user"]["email"] == ANN  # type: ignore[index]
    # The attacker's old session and his account area still show only him.
    assert_attacker_sees_only_himself(app, attacker.client, attacker_user.id, ann_user.id)

    # His provider sign-in, again from a fresh browser, lands on his user, not hers.
    again = Browser(app.test_client())
    assert error_of(again.sign_in("op-basic", login_hint="mallory")) is None
    assert session_user_ids(app)[-1] == attacker_user.id
    assert user_of(app, "op-basic", "mallory").id == attacker_user.id


def credentials_app(make_oauth_app: Any, mailbox: Mailbox, *, verified: bool) -> Flask:
    """An app whose credentials hook accepts PASSWORD for any address, vouching for the
    address only when ``verified`` (an app with or without e-mail confirmation)."""
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form: Any) -> UserInfo | None:
        if form["password"] != PASSWORD:
            return None
        email = form["email"].strip().lower()
        return UserInfo(email=email, name="Hook user", subject=email, email_verified=verified)

    return make_oauth_app(
        [{"id": "password", "type": "credentials", "name": "Password"}],
        hooks=hooks,
        EMAIL_SERVER=mailbox.url(),
    )


def credentials_sign_in(client: FlaskClient, email: str) -> Any:
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    return client.post(
        "/auth/callback/password", data={"csrfToken": csrf, "email": email, "password": PASSWORD}
    )


def test_credentials_hook_without_verification_cannot_pre_hijack(
    make_oauth_app: Any, mailbox: Mailbox
) -> None:
    app = credentials_app(make_oauth_app, mailbox, verified=False)
    attacker = app.test_client()
    assert error_of(credentials_sign_in(attacker, ANN)) is None

    ann = app.test_client()
    email_sign_in(ann, mailbox, ANN)
    ann_user = user_of(app, "email", ANN)
    attacker_user = user_of(app, "password", ANN)
    assert session_of(ann)["user"]["email"] == ANN  # type: ignore[index]
    assert_attacker_sees_only_himself(app, attacker, attacker_user.id, ann_user.id)

    assert error_of(credentials_sign_in(app.test_client(), ANN)) is None
    assert session_user_ids(app)[-1] == attacker_user.id


def test_credentials_hook_that_vouches_links_to_the_owner(
    make_oauth_app: Any, mailbox: Mailbox
) -> None:
    app = credentials_app(make_oauth_app, mailbox, verified=True)
    email_sign_in(app.test_client(), mailbox, ANN)
    assert error_of(credentials_sign_in(app.test_client(), ANN)) is None
    [ann] = users(app)
    assert user_of(app, "password", ANN).id == ann.id
    assert set(session_user_ids(app)) == {ann.id}


def test_provider_that_verifies_links_when_allowed(
    node_op: Any, make_oauth_app: Any, mailbox: Mailbox
) -> None:
    app = make_oauth_app(
        [node_op.provider_config("op-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, ANN)
    assert error_of(Browser(app.test_client()).sign_in("op-basic", login_hint="ann")) is None
    [ann] = users(app)
    assert user_of(app, "op-basic", "ann").id == ann.id


# -- the prober: an unverified claim tells nothing about the address -------------------


@pytest.mark.parametrize("linking", [False, True])
def test_unverified_claims_on_known_and_unknown_addresses_look_alike(
    node_op: Any, make_oauth_app: Any, mailbox: Mailbox, linking: bool
) -> None:
    app = make_oauth_app(
        [node_op.provider_config("op-basic", allow_dangerous_email_account_linking=linking)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, ANN)  # ann@ has an account; bob@ has none
    answers = []
    for login in ("mallory", "bob"):  # claims ann@ and bob@, neither verified
        browser = Browser(app.test_client())
        response = browser.sign_in("op-basic", login_hint=login, callback_url="/after")
        # Cookie names, less the digest of each flow's own state.
        cookies = sorted(
            re.sub(r"\.[0-9a-f]{16}$", "", c.split("=", 1)[0])
            for c in response.headers.getlist("Set-Cookie")
        )
        answers.append((response.status_code, response.headers["Location"], cookies))
    assert answers[0] == answers[1]
    assert answers[0][:2] == (302, APP_ORIGIN + "/after")
    ann, mallory, bob = (
        user_of(app, "email", ANN),
        user_of(app, "op-basic", "mallory"),
        user_of(app, "op-basic", "bob"),
    )
    assert len({ann.id, mallory.id, bob.id}) == 3
    assert (mallory.email, mallory.email_verified) == (ANN, None)
    assert (bob.email, bob.email_verified) == ("bob@example.com", None)


def test_signed_in_linking_of_an_unverified_claim_is_not_refused(
    node_op: Any, make_oauth_app: Any, mailbox: Mailbox
) -> None:
    """Refusing would be the same oracle, for anyone signed in: the claim proves nothing,
    so it links to the signed-in user and changes nothing about the address."""
    app = make_oauth_app([node_op.provider_config("op-basic")], EMAIL_SERVER=mailbox.url())
    email_sign_in(app.test_client(), mailbox, ANN)
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(browser.sign_in("op-basic", login_hint="mallory")) is None
    someone = user_of(app, "demo", "someone@example.com")
    assert user_of(app, "op-basic", "mallory").id == someone.id
    assert someone.email == "someone@example.com"
    assert user_of(app, "email", ANN).email == ANN


def test_an_unverified_holder_does_not_block_linking_a_verified_address(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    # The demo never verifies.
    assert error_of(demo_sign_in(app.test_client(), "alice@example.com")) is None
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(browser.sign_in("op-basic", login_hint="alice")) is None
    assert user_of(app, "op-basic", "alice").id == user_of(app, "demo", "someone@example.com").id


# -- the owner arrives: unverified claims are withdrawn --------------------------------


def test_the_first_verified_owner_takes_the_address_from_unverified_holders(
    node_op: Any, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    attacker = Browser(app.test_client())
    assert error_of(attacker.sign_in("op-basic", login_hint="mallory")) is None
    assert error_of(demo_sign_in(app.test_client(), ANN)) is None
    assert [u.email for u in users(app)] == [ANN, ANN]

    with caplog.at_level(logging.INFO, logger="webapp.flows.signin.identity"):
        # Ann at the provider that verifies; e-mail linking is off, and nobody owns ann@.
        assert error_of(Browser(app.test_client()).sign_in("op-basic", login_hint="ann")) is None
    mallory, demo, ann = users(app)
    assert (ann.email, ann.email_verified is not None) == (ANN, True)
    assert mallory.email is None and demo.email is None
    assert user_of(app, "op-basic", "ann").id == ann.id
    assert session_of(attacker.client)["user"]["email"] is None  # type: ignore[index]
    [line] = [r.getMessage() for r in caplog.records if "withdrawn" in r.getMessage()]
    assert f"users {mallory.id}, {demo.id}" in line and ANN not in line


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as provider:
        provider.userinfo = {"sub": "user-1", "email": ANN, "email_verified": False, "name": "Fay"}
        provider.claims = {"email": ANN, "email_verified": False}
        yield provider


def vouch(fake: FakeIdP, verified: bool) -> None:
    assert fake.userinfo is not None
    fake.userinfo["email_verified"] = fake.claims["email_verified"] = verified


def test_a_known_identity_verifying_its_address_takes_it(
    fake: FakeIdP, make_oauth_app: Any
) -> None:
    app = make_oauth_app([fake.provider_config()])
    assert error_of(Browser(app.test_client()).sign_in("fake")) is None
    assert error_of(demo_sign_in(app.test_client(), ANN)) is None
    vouch(fake, True)
    assert error_of(Browser(app.test_client()).sign_in("fake")) is None
    fay, demo = users(app)
    assert (fay.email, fay.email_verified is not None) == (ANN, True)
    assert demo.email is None


def test_a_known_identity_verifying_an_owned_address_leaves_it_unverified(
    fake: FakeIdP, make_oauth_app: Any, mailbox: Mailbox
) -> None:
    app = make_oauth_app([fake.provider_config()], EMAIL_SERVER=mailbox.url())
    email_sign_in(app.test_client(), mailbox, ANN)
    assert error_of(Browser(app.test_client()).sign_in("fake")) is None
    vouch(fake, True)
    assert error_of(Browser(app.test_client()).sign_in("fake")) is None
    owner, fay = users(app)
    assert owner.email_verified is not None and fay.email_verified is None
    assert user_of(app, "fake", "user-1").id == fay.id


# -- races: the unique partial index still decides -------------------------------------

#: At most EMAIL_ADDRESS_IP_LIMIT requests for one address from one IP get a message.
RACERS = 3


def test_concurrent_first_sign_ins_of_one_address_make_one_user(
    make_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = make_app(EMAIL_SERVER=mailbox.url(), DB_POOL_SIZE=str(RACERS + 2))
    racers = []
    for _ in range(RACERS):
        actions = EmailActions(app.test_client())
        actions.request_link(ANN)
        racers.append(actions)
    assert len(mailbox.messages) == RACERS
    forms = []
    for actions, message in zip(racers, mailbox.messages, strict=True):
        page = actions.open_link(link_of(message)).get_data(as_text=True)
        forms.append(dict(re.findall(r'name="(\w+)" value="([^"]*)"', page)))

    start = threading.Barrier(RACERS)
    results: list[str] = []

    def press(actions: EmailActions, form: dict[str, str]) -> None:
        start.wait()
        results.append(actions.client.post("/auth/callback/email", data=form).headers["Location"])

    threads = [
        threading.Thread(target=press, args=pair) for pair in zip(racers, forms, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [APP_ORIGIN + "/"] * RACERS
    [ann] = users(app)
    assert session_user_ids(app) == [ann.id] * RACERS
    assert all(actions.session_email() == ANN for actions in racers)


# -- profile pictures ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "allow_http", "kept"),
    [
        ("https://cdn.example.com/a.png", False, True),
        ("https://cdn.example.com:8443/a.png?s=96", False, True),
        ("http://cdn.example.com/a.png", True, True),  # development
        ("http://cdn.example.com/a.png", False, False),  # production
        ("javascript:alert(1)", True, False),
        ("JavaScript:alert(1)", True, False),
        ("data:image/svg+xml,<svg onload=alert(1)>", True, False),
        ("/account/delete", True, False),
        ("avatar.png", True, False),
        ("//cdn.example.com/a.png", True, False),
        ("https:/cdn.example.com/a.png", True, False),
        ("https:\\\\evil.example/a.png", True, False),
        ("https://user:pw@cdn.example.com/a.png", True, False),
        ("https://cdn.example.com\\@evil.example/a.png", True, False),
        ("https://cdn.example.com:port/a.png", True, False),
        ("https://cdn.example.com/a b.png", True, False),
        ("https://cdn.example.com/a.png\n", True, False),
        ("\x00https://cdn.example.com/a.png", True, False),
        ("java\tscript:alert(1)", True, False),
        ("https://cdn.example.com/\x85", True, False),
        ("https://cdn.example.com/" + "a" * (MAX_PICTURE_URL - 24), False, True),
        ("https://cdn.example.com/" + "a" * (MAX_PICTURE_URL - 23), False, False),
        ("", True, False),
        (None, True, False),
    ],
)
def test_picture_url_rule(url: str | None, allow_http: bool, kept: bool) -> None:
    assert picture_url(url, allow_http=allow_http) == (url if kept else None)


@pytest.mark.parametrize(
    ("picture", "stored"),
    [
        ("https://cdn.example.com/fay.png", "https://cdn.example.com/fay.png"),
        ("javascript:alert(document.cookie)", None),
        ("https://cdn.example.com/" + "a" * MAX_PICTURE_URL, None),
    ],
)
def test_provider_pictures_are_stored_only_when_safe(
    fake: FakeIdP, make_oauth_app: Any, picture: str, stored: str | None
) -> None:
    assert fake.userinfo is not None
    fake.userinfo["picture"] = picture
    app = make_oauth_app([fake.provider_config()])
    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("fake")) is None
    [user] = users(app)
    assert user.image == stored
    assert session_of(browser.client)["user"]["image"] == stored  # type: ignore[index]


# -- the migration: down keeps every row and makes the address unique again ------------


def test_downgrade_clears_only_unverified_duplicates_and_keeps_every_row(
    empty_database: str,
) -> None:
    app = create_app(base_config(empty_database), environ={})
    now = "2026-11-22 12:00:00+00"
    rows = [  # id, email, verified
        (1, "both@example.com", False),
        (2, "both@example.com", False),
        (3, "owned@example.com", True),
        (4, "owned@example.com", False),
        (5, "alone@example.com", False),
        (6, None, False),
    ]
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
        with db.engine.begin() as conn:
            for user_id, email, verified in rows:
                conn.execute(
                    sa.text(
                        "INSERT INTO users (id, email, email_verified, created_at, updated_at) "
                        "VALUES (:id, :email, :verified, :now, :now)"
                    ),
                    {
                        "id": user_id,
                        "email": email,
                        "verified": now if verified else None,
                        "now": now,
                    },
                )
                conn.execute(
                    sa.text(
                        "INSERT INTO accounts (user_id, type, provider, provider_account_id, "
                        "created_at, updated_at) VALUES (:id, 'oidc', 'op', :sub, :now, :now)"
                    ),
                    {"id": user_id, "sub": f"sub-{user_id}", "now": now},
                )
                conn.execute(
                    sa.text(
                        "INSERT INTO sessions (user_id, token_hash, expires, created_at, "
                        "last_active_at) VALUES (:id, :hash, '2099-01-01 00:00:00+00', :now, :now)"
                    ),
                    {"id": user_id, "hash": f"{user_id:064d}", "now": now},
                )

        downgrade(directory=str(MIGRATIONS_DIR), revision="0002_email_sign_in")
        with db.engine.connect() as conn:
            emails = dict(conn.execute(sa.text("SELECT id, email FROM users")).all())
            counts = [
                conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar()
                for t in ("accounts", "sessions", "active_sessions")
            ]
        assert emails == {
            1: None,
            2: None,
            3: "owned@example.com",
            4: None,
            5: "alone@example.com",
            6: None,
        }
        # SQLite rebuilds users: without foreign keys off, that would cascade to these.
        assert counts == [6, 6, 6]
        uniques = {
            tuple(u["column_names"]) for u in sa.inspect(db.engine).get_unique_constraints("users")
        }
        assert ("email",) in uniques

        upgrade(directory=str(MIGRATIONS_DIR))
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM sessions")).scalar() == 6
            foreign_keys = (
                conn.execute(sa.text("PRAGMA foreign_keys")).scalar()
                if conn.dialect.name == "sqlite"
                else 1
            )
        assert foreign_keys == 1
        db.engine.dispose()


@pytest.mark.parametrize(
    "address", ["Ann@Example.com", "ann@example.com\r\nBcc: evil@example.com", " ann@example.com"]
)
def test_no_user_row_is_written_with_an_address_outside_the_normal_form(app, address):
    # Every flow normalises its source's address; resolve_user checks once more before a
    # row exists, so a flow that forgot cannot store a header-breaking address.
    with app.test_request_context(), pytest.raises(AuthError) as refused:
        resolve_user(
            provider="local",
            provider_type="oidc",
            subject="s-1",
            info=UserInfo(email=address, subject="s-1", email_verified=True),
            current_user_id=None,
            allow_email_linking=False,
            create_error="OAuthCreateAccount",
        )
    assert refused.value.code == "OAuthCreateAccount"
    with app.app_context():
        assert db.session.query(User).count() == 0
