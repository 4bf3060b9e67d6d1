"""Shared fixtures: the app on real databases (SQLite and PostgreSQL), clients, row
factories (``user_factory``, ``account_factory``, ``session_factory``); the plain helpers
they share with the tests (``free_port``, ``row_count``, ``demo_sign_in``, ``AuthActions``)
are in tests/helpers.py.

Each database is created and migrated once per test session; tests get a fresh app and
empty tables. PostgreSQL is reached at TEST_DATABASE_URL (default: the local server on
127.0.0.1:5432 with trust auth). When it is missing, its tests are skipped, except under
CI=true, where a missing PostgreSQL fails the run.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp import MIGRATIONS_DIR, create_app
from webapp.auth.hooks import AuthHooks
from webapp.auth.sessions import hash_token, new_token
from webapp.database import driver_statement
from webapp.extensions import db
from webapp.models import Account, Session, User

from .helpers import AuthActions, NewSession

# SMTP servers on loopback, the outbox and the e-mail sign-in actions; the audit tests' app.
pytest_plugins = ["tests.fixtures_smtp", "tests.audit_support"]

TEST_SECRET = "test-secret-" + "x" * 40
PG_ADMIN_URL = os.environ.get(
    "TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI", "").lower() == "true"


@functools.cache
def pg_admin_engine() -> sa.Engine:
    # NullPool: no idle connection outlives its use (they would block DROP DATABASE).
    return sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def postgres_available() -> bool:
    try:
        with pg_admin_engine().connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True
    except sa.exc.OperationalError:
        return False


def require_postgres() -> None:
    if postgres_available():
        return
    message = f"PostgreSQL is not reachable at {PG_ADMIN_URL}"
    if IN_CI:
        pytest.fail(message + " (CI=true: a missing service is a failure)", pytrace=False)
    pytest.skip(message)


def create_pg_database(prefix: str = "webapp_test") -> str:
    """Create an empty PostgreSQL database; return its SQLAlchemy URL."""
    require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with pg_admin_engine().connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    return re.sub(r"/[^/]*$", f"/{name}", PG_ADMIN_URL)


def drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with pg_admin_engine().connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def base_config(database_url: str, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "APP_ENV": "development",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "http://localhost/auth",
        "DATABASE_URL": database_url,
        "TESTING": True,
    }
    config.update(overrides)
    return config


def migrate_database(database_url: str, revision: str = "head") -> None:
    from flask_migrate import upgrade

    app = create_app(base_config(database_url), environ={})
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR), revision=revision)
        db.engine.dispose()


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated database of each kind, shared by the whole test session."""
    if request.param == "sqlite":
        url = "sqlite:///" + str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")
        migrate_database(url)
        yield url
        return
    yield from _migrated_pg_database()


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    """A migrated PostgreSQL database for tests that need PostgreSQL specifically."""
    yield from _migrated_pg_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each kind (nothing migrated), for migration tests."""
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path / "fresh.sqlite3")
        return
    url = create_pg_database("webapp_migrate")
    yield url
    drop_pg_database(url)


def _migrated_pg_database() -> Iterator[str]:
    url = create_pg_database()
    try:
        migrate_database(url)
        yield url
    finally:
        drop_pg_database(url)


def _empty_tables() -> None:
    tables = [t for t in reversed(db.metadata.sorted_tables)]
    with db.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            names = ", ".join(f'"{t.name}"' for t in tables)
            conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                conn.execute(table.delete())


@pytest.fixture
def make_app(database_url: str) -> Iterator[Callable[..., Flask]]:
    """Build apps on the shared database: ``make_app(AUTH_URL=…, hooks=…)``."""
    made: list[Flask] = []

    def factory(*, hooks: AuthHooks | None = None, **overrides: Any) -> Flask:
        app = create_app(base_config(database_url, **overrides), environ={}, hooks=hooks)
        made.append(app)
        return app

    yield factory
    for app in made:
        with app.app_context():
            _empty_tables()
            db.engine.dispose()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> Any:
    return app.test_cli_runner()


@pytest.fixture
def auth(client: FlaskClient) -> AuthActions:
    return AuthActions(client)


# -- rows made directly through the models ----------------------------------------------
# Each factory takes the app first (any app: ``app``, one from ``make_app``, or one built
# on ``postgres_url``), commits, and returns plain data usable outside the app context.


@pytest.fixture
def user_factory() -> Callable[..., int]:
    """``user_factory(app, email=…, **columns)``: add a user; return its id.

    The default address is unique and unverified; pass ``email_verified=<a datetime>`` to make
    the user its owner.
    """

    def make(app: Flask, **columns: Any) -> int:
        columns.setdefault("email", f"user-{uuid.uuid4().hex[:8]}@example.com")
        with app.app_context():
            user = User(**columns)
            db.session.add(user)
            db.session.commit()
            return int(user.id)

    return make


@pytest.fixture
def account_factory() -> Callable[..., int]:
    """``account_factory(app, user_id, provider="github", **columns)``: link a sign-in
    method (an OAuth identity ``<provider>-<user_id>`` by default); return its id."""

    def make(app: Flask, user_id: int, provider: str = "github", **columns: Any) -> int:
        columns.setdefault("type", "oauth")
        columns.setdefault("provider_account_id", f"{provider}-{user_id}")
        with app.app_context():
            account = Account(user_id=user_id, provider=provider, **columns)
            db.session.add(account)
            db.session.commit()
            return int(account.id)

    return make


@pytest.fixture
def session_factory() -> Callable[..., NewSession]:
    """``session_factory(app, user_id, **columns)``: add a session; return a ``NewSession``
    whose ``token`` works as the session cookie (``client.set_cookie(…)``).

    Created and last active now, expiring in 30 days (the default max age) unless given.
    """

    def make(app: Flask, user_id: int, **columns: Any) -> NewSession:
        token = new_token()
        token_hash = hash_token(token)
        now = datetime.now(UTC)
        columns.setdefault("expires", now + timedelta(days=30))
        columns.setdefault("created_at", now)
        columns.setdefault("last_active_at", now)
        with app.app_context():
            row = Session(user_id=user_id, token_hash=token_hash, **columns)
            db.session.add(row)
            db.session.commit()
            return NewSession(int(row.id), user_id, token, token_hash)

    return make


class SqlCounter:
    """Records the SQL statements an engine runs while active, and those run on the
    driver directly (database.HotSelect announces each one)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def driver_statement(self, _sender: Any, *, statement: str) -> None:
        self.statements.append(statement)

    @property
    def writes(self) -> list[str]:
        return [
            s
            for s in self.statements
            if s.lstrip().split()[0].upper() in {"INSERT", "UPDATE", "DELETE"}
        ]


@contextmanager
def counting_sql(app: Flask) -> Iterator[SqlCounter]:
    """Record every statement ``app``'s engine runs meanwhile."""
    counter = SqlCounter()
    with app.app_context():
        engine = db.engine
    sa.event.listen(engine, "before_cursor_execute", counter)
    driver_statement.connect(counter.driver_statement)
    try:
        yield counter
    finally:
        sa.event.remove(engine, "before_cursor_execute", counter)
        driver_statement.disconnect(counter.driver_statement)


@pytest.fixture
def count_sql(app: Flask) -> Callable[[], Any]:
    """``with count_sql() as sql: …`` records every statement the app's engine runs."""
    return lambda: counting_sql(app)


@pytest.fixture(scope="session")
def node_op(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The npm package oidc-provider on a loopback port, for the whole test session."""
    from .oauth_support import NodeOP

    op = NodeOP(tmp_path_factory.mktemp("oidc-provider"))
    op.start()
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture
def make_oauth_app(make_app: Callable[..., Flask], tmp_path: Path) -> Callable[..., Flask]:
    """``make_oauth_app([provider tables], **settings)``: an app with those providers."""
    from .oauth_support import write_providers_toml

    def factory(entries: list[dict[str, Any]], **overrides: Any) -> Flask:
        path = write_providers_toml(tmp_path / f"auth-{uuid.uuid4().hex[:8]}.toml", entries)
        return make_app(AUTH_CONFIG=str(path), **overrides)

    return factory
