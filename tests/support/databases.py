"""The test databases: PostgreSQL databases created and dropped on the server at
TEST_DATABASE_URL (default: the local server on 127.0.0.1:5432 with trust auth), migrating
any database to a revision, and emptying the app's tables between tests.

The fixtures that hand them out (``database_url``, ``postgres_url``, ``empty_database``,
``make_app``) are in tests/conftest.py.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Iterator

import sqlalchemy as sa

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.db import db

from .config import base_config, missing_service

PG_ADMIN_URL = os.environ.get(
    "TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


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
    """Skip the calling test when PostgreSQL is unreachable; fail it under CI=true."""
    if postgres_available():
        return
    missing_service(f"PostgreSQL is not reachable at {PG_ADMIN_URL}")


def create_pg_database(prefix: str = "webapp_test") -> str:
    """Create an empty PostgreSQL database; return its SQLAlchemy URL."""
    require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with pg_admin_engine().connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        # A commit need not wait for the disk: a test database is thrown away, and every
        # test commits many times (the server stays consistent; only a crash loses the
        # last commits).
        conn.execute(sa.text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
    return re.sub(r"/[^/]*$", f"/{name}", PG_ADMIN_URL)


def drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with pg_admin_engine().connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def migrate_database(database_url: str, revision: str = "head") -> None:
    from flask_migrate import upgrade

    app = create_app(base_config(database_url), environ={})
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR), revision=revision)
        db.engine.dispose()


def migrated_pg_database() -> Iterator[str]:
    """Yield the URL of a new, migrated PostgreSQL database; drop it afterwards."""
    url = create_pg_database()
    try:
        migrate_database(url)
        yield url
    finally:
        drop_pg_database(url)


def empty_tables() -> None:
    """Delete every row of the current app's tables and restart their ids at 1 (call it in
    an app context).

    DELETE, not TRUNCATE: on tables this small TRUNCATE costs about 25 ms (it swaps each
    table's files), DELETE about 2 ms, and this runs after every test.
    """
    with db.engine.begin() as conn:
        for table in reversed(db.metadata.sorted_tables):
            conn.execute(table.delete())
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text(
                    "SELECT setval(oid, 1, false) FROM pg_class"
                    " WHERE relkind = 'S' AND relnamespace = 'public'::regnamespace"
                )
            )
