"""Provider tokens sealed at rest: webapp.core.sealing, the SealedText columns of accounts,
migration 0004 and ``flask auth rotate-secrets``.

No dump of the database holds a token the provider issued, while a DBA still sees who has
tokens, when they expire and their scope; the sealing's properties (nonce, context, tamper,
previous secrets); a value under an old secret is re-sealed when written, and by the command
(in batches; unreadable rows reported and left alone); the migration seals existing rows,
is safe to run again, and its downgrade unseals them or refuses, changing nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from flask import Flask, current_app
from flask_migrate import downgrade, upgrade

from webapp import MIGRATIONS_DIR, create_app
from webapp.core import sealing
from webapp.storage.db import db
from webapp.storage.models import Account

from .support.config import TEST_SECRET, base_config
from .support.oauth import Browser, error_of

SECRET_A = TEST_SECRET  # what make_app() seals under
SECRET_B = "rotated-secret-" + "b" * 40
SECRET_C = "unknown-secret-" + "c" * 40
TOKENS = ("access_token", "refresh_token", "id_token")
BEFORE_0004 = "0003_verified_email_identity"


def raw_tokens(app: Flask, account_id: int) -> dict[str, str | None]:
    """The token columns as the database holds them (past the column type)."""
    with app.app_context(), db.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT access_token, refresh_token, id_token FROM accounts WHERE id = :id"),
            {"id": account_id},
        ).one()
    return dict(zip(TOKENS, row, strict=True))


def model_tokens(app: Flask, account_id: int) -> dict[str, str | None]:
    """The token columns as the application reads them (through SealedText)."""
    with app.app_context():
        account = db.session.get(Account, account_id)
        assert account is not None
        return {name: getattr(account, name) for name in TOKENS}


def prefix_of(app: Flask) -> str:
    with app.app_context():
        return sealing.current_prefix()


# -- 1. a dump of the database ---------------------------------------------------------


@pytest.mark.e2e
def test_a_dump_of_every_table_holds_no_provider_token(
    node_op: Any, make_oauth_app: Callable[..., Flask]
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    assert error_of(Browser(app.test_client()).sign_in("op-basic", login_hint="alice")) is None
    with app.app_context():
        account = db.session.execute(sa.select(Account)).scalar_one()
        tokens = [account.access_token, account.refresh_token, account.id_token]
        expires_at, scope = account.expires_at, account.scope
        prefix = sealing.current_prefix()
    assert all(tokens), tokens
    assert node_op.introspect(tokens[0])["active"] is True  # the very token the OP issued

    cells: dict[str, list[str]] = {}
    with app.app_context(), db.engine.connect() as conn:
        inspector = sa.inspect(conn)
        for table in inspector.get_table_names() + inspector.get_view_names():
            rows = conn.execute(sa.text(f'SELECT * FROM "{table}"')).all()
            cells[table] = [str(value) for row in rows for value in row]
        raw = conn.execute(
            sa.text("SELECT access_token, refresh_token, id_token, expires_at, scope FROM accounts")
        ).one()
        with_tokens = conn.execute(
            sa.text(
                "SELECT count(*) FROM accounts WHERE access_token IS NOT NULL "
                "AND refresh_token IS NOT NULL AND id_token IS NOT NULL"
            )
        ).scalar_one()
    # The dump did read the rows of the sign-in: the user, the account, the session.
    assert {"users", "accounts", "sessions"} <= cells.keys()
    assert "alice@example.com" in cells["users"] and "alice" in cells["accounts"]
    assert cells["sessions"]
    for table, values in cells.items():
        for token in tokens:
            assert not any(token in value for value in values), f"a provider token in {table}"

    # Sealed under the current secret; who has tokens, their expiry and scope stay in the clear.
    assert all(str(value).startswith(prefix) for value in raw[:3]), raw[:3]
    assert with_tokens == 1
    stored_expiry = (
        datetime.fromisoformat(raw.expires_at)
        if isinstance(raw.expires_at, str)
        else raw.expires_at
    )
    if stored_expiry.tzinfo is None:
        stored_expiry = stored_expiry.replace(tzinfo=UTC)
    assert stored_expiry == expires_at
    assert raw.scope == scope and "openid" in raw.scope.split()


# -- 2. the sealing itself ---------------------------------------------------------------

CONTEXT = "accounts.access_token"


def test_sealing_round_trips_with_a_fresh_nonce_each_time(make_app: Callable[..., Flask]) -> None:
    with make_app().app_context():
        for value in ("an-opaque-token", "", "ünïcødé ✓ " * 50):
            sealed = sealing.seal(value, context=CONTEXT)
            assert sealed.startswith(sealing.current_prefix())
            assert sealing.open_sealed(sealed, context=CONTEXT) == value
        first = sealing.seal("same-token-value", context=CONTEXT)
        second = sealing.seal("same-token-value", context=CONTEXT)
        assert first != second
        assert "same-token-value" not in first
        assert sealing.open_sealed(first, context=CONTEXT) == "same-token-value"
        assert sealing.open_sealed(second, context=CONTEXT) == "same-token-value"


def test_a_sealed_value_opens_only_in_its_own_column(make_app: Callable[..., Flask]) -> None:
    with make_app().app_context():
        sealed = sealing.seal("an-access-token", context="accounts.access_token")
        for other in ("accounts.refresh_token", "accounts.id_token", "accounts.access_token "):
            with pytest.raises(sealing.Unreadable):
                sealing.open_sealed(sealed, context=other)
        assert sealing.open_sealed(sealed, context="accounts.access_token") == "an-access-token"


def test_a_tampered_value_does_not_open(make_app: Callable[..., Flask]) -> None:
    with make_app().app_context():
        sealed = sealing.seal("an-access-token", context=CONTEXT)
        version, key_id, body = sealed.split(".")
        middle = len(body) // 2  # a whole base64 digit: the bytes really change
        flipped = body[:middle] + ("A" if body[middle] != "A" else "B") + body[middle + 1 :]
        tampered = [
            f"{version}.{key_id}.{flipped}",
            f"{version}.{key_id}.{body[:-4]}",  # truncated: the tag is cut off
            f"{version}.{key_id}.{body[:20]}",
            f"{version}.{key_id}.{body}{body[-4:]}",  # extended
        ]
        for value in tampered:
            with pytest.raises(sealing.Unreadable):
                sealing.open_sealed(value, context=CONTEXT)


def test_a_previous_secret_opens_only_while_configured(make_app: Callable[..., Flask]) -> None:
    with make_app().app_context():  # AUTH_SECRET=A
        sealed = sealing.seal("sealed-under-a", context=CONTEXT)
        prefix_a = sealing.current_prefix()
    rotated = make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=f"{SECRET_C},{SECRET_A}")
    with rotated.app_context():
        assert sealing.open_sealed(sealed, context=CONTEXT) == "sealed-under-a"
        # New values are sealed under the current secret only.
        assert sealing.current_prefix() != prefix_a
        assert sealing.seal("new", context=CONTEXT).startswith(sealing.current_prefix())
    for app in (
        make_app(AUTH_SECRET=SECRET_B),
        make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=SECRET_C),
    ):
        with app.app_context(), pytest.raises(sealing.Unreadable):
            sealing.open_sealed(sealed, context=CONTEXT)


def test_garbage_and_plaintext_are_unreadable(make_app: Callable[..., Flask]) -> None:
    with make_app().app_context():
        sealed = sealing.seal("a-token", context=CONTEXT)
        _, key_id, body = sealed.split(".")
        for value in (
            "",
            "a-plaintext-access-token",
            "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl",  # a JWT
            "v1.",
            f"v1.{key_id}",
            f"v1.{key_id}.",
            f"v2.{key_id}.{body}",
            f"v1.00000000.{body}",
            f"v1.{key_id}.!!not*base64!!",
            f"v1.{key_id}.AAAA",
        ):
            with pytest.raises(sealing.Unreadable):
                sealing.open_sealed(value, context=CONTEXT)


# -- 3. and 4. rotating AUTH_SECRET ------------------------------------------------------


def test_a_token_under_a_previous_secret_is_resealed_when_written(
    make_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app_a = make_app()
    user_id = user_factory(app_a)
    account_id = account_factory(
        app_a, user_id, access_token="at-1", refresh_token="rt-1", id_token="it-1"
    )
    prefix_a = prefix_of(app_a)
    assert all(v.startswith(prefix_a) for v in raw_tokens(app_a, account_id).values())

    rotated = make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=SECRET_A)
    prefix_b = prefix_of(rotated)
    assert prefix_b != prefix_a
    assert model_tokens(rotated, account_id) == {
        "access_token": "at-1",
        "refresh_token": "rt-1",
        "id_token": "it-1",
    }
    with rotated.app_context():
        account = db.session.get(Account, account_id)
        account.access_token = "at-2"
        db.session.commit()
    raw = raw_tokens(rotated, account_id)
    assert raw["access_token"].startswith(prefix_b) and "at-2" not in raw["access_token"]
    assert model_tokens(rotated, account_id)["access_token"] == "at-2"
    # Only the new secret opens it now: the old one alone reads no token, and says so.
    with caplog.at_level(logging.WARNING, logger="webapp.storage.models"):
        assert model_tokens(make_app(), account_id)["access_token"] is None
    assert any("accounts.access_token" in r.getMessage() for r in caplog.records)


def rotate(app: Flask, batch_size: int = 2) -> Any:
    return app.test_cli_runner().invoke(
        args=["auth", "rotate-secrets", "--batch-size", str(batch_size)]
    )


def test_rotate_secrets_reseals_every_token_under_the_current_secret(
    make_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
) -> None:
    app_a = make_app()
    rotated = make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=SECRET_A)
    expected: dict[int, dict[str, str | None]] = {}

    def add(app: Flask, **tokens: str) -> None:
        account_id = account_factory(app, user_factory(app), **tokens)
        expected[account_id] = {name: tokens.get(name) for name in TOKENS}

    for n in range(3):
        add(app_a, access_token=f"at-{n}", refresh_token=f"rt-{n}", id_token=f"it-{n}")
    add(app_a, access_token="only-an-access-token")
    add(app_a, refresh_token="only-a-refresh-token", id_token="and-an-id-token")
    add(app_a)  # no tokens: nothing to re-seal
    add(rotated, access_token="already-under-b", refresh_token="rt-b")
    prefix_a, prefix_b = prefix_of(app_a), prefix_of(rotated)

    result = rotate(rotated)
    assert result.exit_code == 0, result.output
    assert "re-sealed 5 row(s) under the current secret" in result.output
    for account_id, tokens in expected.items():
        raw = raw_tokens(rotated, account_id)
        for name, plaintext in tokens.items():
            if plaintext is None:
                assert raw[name] is None
            else:
                assert raw[name].startswith(prefix_b), (account_id, name, raw[name])
                assert plaintext not in raw[name]
    # The old secret can go: the new one alone reads every token.
    only_b = make_app(AUTH_SECRET=SECRET_B)
    for account_id, tokens in expected.items():
        assert model_tokens(only_b, account_id) == tokens
    with app_a.app_context(), db.engine.connect() as conn:
        left = conn.execute(
            sa.text(
                "SELECT count(*) FROM accounts WHERE access_token LIKE :a "
                "OR refresh_token LIKE :a OR id_token LIKE :a"
            ),
            {"a": prefix_a + "%"},
        ).scalar_one()
    assert left == 0

    again = rotate(rotated)
    assert again.exit_code == 0, again.output
    assert "re-sealed 0 row(s) under the current secret" in again.output


def test_rotate_secrets_reports_and_keeps_tokens_no_secret_opens(
    make_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app_c = make_app(AUTH_SECRET=SECRET_C)
    app_a = make_app()
    # The unreadable row comes first, in the first batch: the others are still re-sealed.
    lost = account_factory(app_c, user_factory(app_c), access_token="under-c", refresh_token="rt-c")
    readable = [
        account_factory(app_a, user_factory(app_a), access_token=f"at-{n}", id_token=f"it-{n}")
        for n in range(3)
    ]
    lost_raw = raw_tokens(app_c, lost)
    rotated = make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=SECRET_A)
    prefix_b = prefix_of(rotated)

    result = rotate(rotated)
    assert result.exit_code == 1, result.output
    assert "re-sealed 3 row(s) under the current secret" in result.stdout
    assert "1 row(s) hold tokens no configured secret opens" in result.stderr
    assert "AUTH_PREVIOUS_SECRETS" in result.stderr
    assert raw_tokens(rotated, lost) == lost_raw
    for account_id in readable:
        assert all(
            v is None or v.startswith(prefix_b) for v in raw_tokens(rotated, account_id).values()
        )
    with caplog.at_level(logging.WARNING, logger="webapp.storage.models"):
        assert model_tokens(rotated, lost) == dict.fromkeys(TOKENS)
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    # It stays reported (exit 1) until its secret is configured; then it is re-sealed too.
    assert rotate(rotated).exit_code == 1
    with_c = make_app(AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=f"{SECRET_A},{SECRET_C}")
    done = rotate(with_c)
    assert done.exit_code == 0, done.output
    assert "re-sealed 1 row(s)" in done.output
    assert model_tokens(make_app(AUTH_SECRET=SECRET_B), lost) == {
        "access_token": "under-c",
        "refresh_token": "rt-c",
        "id_token": None,
    }


def test_revoking_unreadable_tokens_by_hand_forgets_them_and_says_so(
    make_app: Callable[..., Flask],
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
) -> None:
    app_c = make_app(AUTH_SECRET=SECRET_C)
    lost = account_factory(app_c, user_factory(app_c, email="lost@example.com"),
                           access_token="under-c", refresh_token="rt-c")  # fmt: skip
    app_b = make_app(AUTH_SECRET=SECRET_B)
    revoked = app_b.test_cli_runner().invoke(
        args=["auth", "revoke-tokens", "--user", "lost@example.com"]
    )
    assert revoked.exit_code == 1
    assert "unreadable (sealed under a secret no longer configured)" in revoked.output
    assert "0 of 1 account(s) revoked" in revoked.output
    assert raw_tokens(app_b, lost) == dict.fromkeys(TOKENS)


def test_rotate_secrets_locks_its_batch_against_a_concurrent_refresh(
    postgres_url: str, user_factory: Callable[..., int], account_factory: Callable[..., int]
) -> None:
    """While a batch is re-sealed its rows are locked (PostgreSQL: FOR UPDATE): a refresh
    committing in between would otherwise be overwritten with the old tokens."""
    app_a = create_app(base_config(postgres_url), environ={})
    settings = {"AUTH_SECRET": SECRET_B, "AUTH_PREVIOUS_SECRETS": SECRET_A}
    rotating = create_app(base_config(postgres_url, **settings), environ={})
    web = create_app(base_config(postgres_url, **settings), environ={})
    account_id = account_factory(
        app_a, user_factory(app_a), access_token="old-at", refresh_token="old-rt"
    )
    attempts: list[str] = []

    def refresh_meanwhile(_conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        # Right after the command read its batch, a request refreshes the account's tokens.
        if attempts or not statement.lstrip().startswith("SELECT") or "accounts" not in statement:
            return
        with web.app_context():
            db.session.execute(sa.text("SET LOCAL lock_timeout = '1s'"))
            try:
                account = db.session.get(Account, account_id)
                assert account is not None
                account.access_token, account.refresh_token = "new-at", "new-rt"
                db.session.commit()
                attempts.append("committed")
            except sa.exc.OperationalError:
                db.session.rollback()
                attempts.append("waited for the lock")

    with rotating.app_context():
        engine = db.engine
    sa.event.listen(engine, "after_cursor_execute", refresh_meanwhile)
    try:
        done = rotate(rotating)
    finally:
        sa.event.remove(engine, "after_cursor_execute", refresh_meanwhile)
    assert done.exit_code == 0, done.output
    assert attempts == ["waited for the lock"]
    assert model_tokens(web, account_id)["refresh_token"] == "old-rt"
    for app in (app_a, rotating, web):
        with app.app_context():
            db.engine.dispose()


# -- 5. migration 0004 -------------------------------------------------------------------

PLAINTEXT = {
    "access_token": "plain-access-token-0004",
    "refresh_token": "plain-refresh-token-0004",
    "id_token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.plain-id-token-0004",
}


def only_access(value: str) -> dict[str, str | None]:
    return {"access_token": value, "refresh_token": None, "id_token": None}


def insert_account(tokens: dict[str, str | None], subject: str = "alice") -> int:
    """Insert a user and an account with these token columns as given, by plain SQL."""
    with db.engine.begin() as conn:
        user_id = conn.execute(
            sa.text(
                "INSERT INTO users (email, created_at, updated_at) "
                "VALUES (:email, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) RETURNING id"
            ),
            {"email": f"{subject}@example.com"},
        ).scalar_one()
        return int(
            conn.execute(
                sa.text(
                    "INSERT INTO accounts (user_id, type, provider, provider_account_id, "
                    "access_token, refresh_token, id_token, scope, created_at, updated_at) "
                    "VALUES (:user_id, 'oidc', 'op-basic', :subject, :access_token, "
                    ":refresh_token, :id_token, 'openid', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) "
                    "RETURNING id"
                ),
                {"user_id": user_id, "subject": subject, **tokens},
            ).scalar_one()
        )


def stored(account_id: int) -> dict[str, str | None]:
    with db.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT access_token, refresh_token, id_token FROM accounts WHERE id = :id"),
            {"id": account_id},
        ).one()
    return dict(zip(TOKENS, row, strict=True))


def read_through_model(account_id: int) -> dict[str, str | None]:
    account = db.session.get(Account, account_id)
    assert account is not None
    tokens = {name: getattr(account, name) for name in TOKENS}
    db.session.remove()
    return tokens


def schema_revision() -> str:
    with db.engine.connect() as conn:
        return str(
            conn.execute(sa.text("SELECT version_num FROM auth_alembic_version")).scalar_one()
        )


def test_migration_0004_seals_existing_tokens_and_downgrade_unseals_them(
    empty_database: str,
) -> None:
    app = create_app(base_config(empty_database), environ={})
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR), revision=BEFORE_0004)
        account_id = insert_account(PLAINTEXT)
        partial = insert_account(only_access("only-access"), "bob")
        assert stored(account_id) == PLAINTEXT

        upgrade(directory=str(MIGRATIONS_DIR))
        prefix = sealing.current_prefix()
        sealed = stored(account_id)
        for name, plaintext in PLAINTEXT.items():
            assert sealed[name].startswith(prefix) and plaintext not in sealed[name]
        assert read_through_model(account_id) == PLAINTEXT
        assert stored(partial)["refresh_token"] is None  # NULL stays NULL
        assert read_through_model(partial)["access_token"] == "only-access"

        downgrade(directory=str(MIGRATIONS_DIR), revision=BEFORE_0004)
        assert schema_revision() == BEFORE_0004
        assert stored(account_id) == PLAINTEXT
        assert stored(partial) == only_access("only-access")

        upgrade(directory=str(MIGRATIONS_DIR))
        resealed = stored(account_id)
        assert all(resealed[n].startswith(prefix) for n in TOKENS)
        assert resealed != sealed  # sealed afresh (a new nonce), yet the same tokens
        assert read_through_model(account_id) == PLAINTEXT
        db.engine.dispose()


def test_migration_0004_run_again_leaves_sealed_values_alone(empty_database: str) -> None:
    """An upgrade interrupted half-way (some values sealed) is simply run again."""
    app = create_app(base_config(empty_database), environ={})
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR), revision=BEFORE_0004)
        already = sealing.seal(PLAINTEXT["access_token"], context="accounts.access_token")
        account_id = insert_account({**PLAINTEXT, "access_token": already})

        upgrade(directory=str(MIGRATIONS_DIR))
        sealed = stored(account_id)
        assert sealed["access_token"] == already  # not sealed twice
        assert sealed["refresh_token"].startswith(sealing.current_prefix())
        assert read_through_model(account_id) == PLAINTEXT
        db.engine.dispose()


def test_migration_0004_downgrade_refuses_a_token_it_cannot_open(empty_database: str) -> None:
    app_a = create_app(base_config(empty_database), environ={})
    with app_a.app_context():
        upgrade(directory=str(MIGRATIONS_DIR), revision="0004_sealed_provider_tokens")
        readable = insert_account(
            {n: sealing.seal(v, context=f"accounts.{n}") for n, v in PLAINTEXT.items()}
        )
        db.engine.dispose()
    app_c = create_app(base_config(empty_database, AUTH_SECRET=SECRET_C), environ={})
    with app_c.app_context():
        lost = insert_account(
            only_access(sealing.seal("under-c", context="accounts.access_token")), "carol"
        )
        db.engine.dispose()

    # It opens A's row (first by id) but not C's: it must refuse, and unseal nothing at all.
    app_b = create_app(
        base_config(empty_database, AUTH_SECRET=SECRET_B, AUTH_PREVIOUS_SECRETS=SECRET_A),
        environ={},
    )
    with app_b.app_context():
        before = {readable: stored(readable), lost: stored(lost)}
        config = current_app.extensions["migrate"].migrate.get_config(str(MIGRATIONS_DIR))
        with pytest.raises(RuntimeError, match="cannot downgrade") as refused:
            command.downgrade(config, BEFORE_0004)
        assert "accounts.access_token" in str(refused.value)
        assert "AUTH_PREVIOUS_SECRETS" in str(refused.value)
        assert schema_revision() == "0004_sealed_provider_tokens"
        assert {readable: stored(readable), lost: stored(lost)} == before
        assert read_through_model(readable) == PLAINTEXT
        db.engine.dispose()
