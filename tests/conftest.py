"""The shared fixtures: the app on real databases (SQLite and PostgreSQL), clients, row
factories (``user_factory``, ``account_factory``, ``session_factory``), the test OpenID
Provider, the test SAML identity provider. Two plugins add more: tests/support/mail.py
(SMTP servers, the outbox, e-mail sign-in) and tests/support/audit.py (``password_app``).
The plain helpers fixtures and tests share (``base_config``, ``free_port``, ``row_count``,
``demo_sign_in``, ``AuthActions``…) are in tests/support/.

Each database is created and migrated once per test session; tests get a fresh app and
empty tables. PostgreSQL is reached at TEST_DATABASE_URL (default: the local server on
127.0.0.1:5432 with trust auth). When it is missing, its tests are skipped, except under
CI=true, where a missing PostgreSQL fails the run.

Every behaviour is tested on PostgreSQL. On SQLite run the modules of ``SQLITE_MODULES``
and the tests marked ``sqlite_too``: what is SQLite's own (migrations, the first run, its
writer lock under concurrent requests) and a smoke set of the main paths;
``AUTH_TESTS_ALL_DATABASES=true`` runs every test on both, as before a release.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from webapp import create_app
from webapp.core.hooks import AuthHooks
from webapp.sessions.store import hash_token, new_token
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.config import base_config
from .support.databases import (
    create_pg_database,
    drop_pg_database,
    empty_tables,
    migrate_database,
    migrated_pg_database,
)
from .support.rows import NewSession
from .support.signin import AuthActions
from .support.sql_counter import counting_sql
from .support.templates import share_compiled_templates

# SMTP servers on loopback, the outbox and the e-mail sign-in actions; the audit tests' app.
pytest_plugins = ["tests.support.mail", "tests.support.audit"]

#: The modules whose tests also run on SQLite (module docstring).
SQLITE_MODULES = frozenset(
    {
        # SQLite's own: its migrations, the first run, and its one writer at a time.
        "test_migrations",
        "test_first_run",
        "test_transactions",
        "test_account_races",
        "test_throttle_races",
        "test_session_limits",
        "test_audit",
        # The smoke set: routes, sessions, e-mail and provider sign-in, health, commands.
        "test_routes",
        "test_sessions",
        "test_email_links",
        "test_oauth_flow",
        "test_health",
        "test_cli",
        "test_startup_errors",
    }
)
ALL_DATABASES = os.environ.get("AUTH_TESTS_ALL_DATABASES", "").lower() == "true"


def pytest_configure(config: pytest.Config) -> None:
    share_compiled_templates()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the SQLite runs of the tests outside ``SQLITE_MODULES``, not marked
    ``sqlite_too``, that also run on PostgreSQL (listed as deselected; a test that runs on
    SQLite only is kept), unless AUTH_TESTS_ALL_DATABASES=true."""
    if ALL_DATABASES:
        return
    ids = {item.nodeid for item in items}
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_sqlite = callspec is not None and "sqlite" in (
            callspec.params.get("database_url"),
            callspec.params.get("empty_database"),
        )
        also_on_postgresql = item.nodeid.replace("sqlite", "postgresql") in ids
        module = item.path.stem
        own = module in SQLITE_MODULES or item.get_closest_marker("sqlite_too") is not None
        drop = on_sqlite and also_on_postgresql and not own
        (left_out if drop else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


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
    yield from migrated_pg_database()


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    """A migrated PostgreSQL database for tests that need PostgreSQL specifically."""
    yield from migrated_pg_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each kind (nothing migrated), for migration tests."""
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path / "fresh.sqlite3")
        return
    url = create_pg_database("webapp_migrate")
    yield url
    drop_pg_database(url)


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
            empty_tables()
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


@pytest.fixture
def count_sql(app: Flask) -> Callable[[], Any]:
    """``with count_sql() as sql: …`` records every statement the app's engine runs."""
    return lambda: counting_sql(app)


@pytest.fixture(scope="session")
def node_op(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The npm package oidc-provider on a loopback port, for the whole test session."""
    from .support.config import started
    from .support.oauth import NodeOP

    yield from started(NodeOP(tmp_path_factory.mktemp("oidc-provider")))


@pytest.fixture(scope="session")
def simplesamlphp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """SimpleSAMLphp (Debian's package), a real SAML identity provider, under PHP's built-in
    server on a loopback port, with a private configuration folder, its own signing key and
    our service provider registered (tests/saml/simplesamlphp.py), for the whole test
    session. Not installed: its tests are skipped, except under CI=true, where that is a
    failure."""
    from .saml.simplesamlphp import SimpleSamlIdp, SimpleSamlMissing
    from .support.config import running

    folder = tmp_path_factory.mktemp("simplesamlphp")
    yield from running(lambda: SimpleSamlIdp(folder), SimpleSamlMissing)


@pytest.fixture
def make_oauth_app(make_app: Callable[..., Flask], tmp_path: Path) -> Callable[..., Flask]:
    """``make_oauth_app([provider tables], **settings)``: an app with those providers."""
    from .support.oauth import write_providers_toml

    def factory(entries: list[dict[str, Any]], **overrides: Any) -> Flask:
        path = write_providers_toml(tmp_path / f"auth-{uuid.uuid4().hex[:8]}.toml", entries)
        return make_app(AUTH_CONFIG=str(path), **overrides)

    return factory
