"""The schema brought up to date once, however many instances start at the same moment.

``flask auth migrate`` (run by ``scripts/serve`` first when MIGRATE_ON_START=true) takes a
PostgreSQL advisory lock, runs Alembic's upgrade to the newest revision on that same
connection, then closes it, which lets the lock go. An instance that finds the lock taken
says so, waits for it, then finds the schema up to date and has nothing to do. A process
that dies while migrating lets go of the lock with its connection.

An advisory lock belongs to a server connection, so it is taken on a connection straight
to PostgreSQL: DATABASE_DIRECT_URL, which a transaction pooler requires (between two
transactions the pooler would hand the lock's connection to other clients). SQLite is one
file on one machine: no lock there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from flask import current_app
from sqlalchemy import Connection, create_engine, func, select
from sqlalchemy.pool import NullPool

from webapp.settings import ConfigError, Settings, current_settings
from webapp.storage.db import db

log = logging.getLogger(__name__)

#: The advisory lock's key, the same for every instance and release: the bytes of
#: "webapp:m" as a number (pg_locks shows it as classid 2003133025, objid 1886403181).
LOCK_KEY = int.from_bytes(b"webapp:m", "big")


@dataclass(frozen=True)
class Upgrade:
    """What one ``upgrade_once`` found and did."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    #: Another process held the lock when this one asked (it was migrating).
    waited: bool

    def describe(self) -> str:
        revision = ", ".join(self.after) or "empty"
        if self.before == self.after:
            return f"the schema is up to date ({revision}); nothing to do"
        return f"migrated the schema from {', '.join(self.before) or 'empty'} to {revision}"


def migration_url(conf: Settings) -> str:
    """Where the migrations run: past the pooler when there is one."""
    if conf.transaction_pooler and conf.database_direct_url is None:
        raise ConfigError(
            "behind a transaction pooler (DATABASE_POOLER=transaction) the migrations need "
            "DATABASE_DIRECT_URL: their lock is held on a connection straight to PostgreSQL"
        )
    return conf.database_direct_url or conf.database_url


def upgrade_once() -> Upgrade:
    """Upgrade the schema to the newest revision, holding the migrations' lock (PostgreSQL)."""
    url = migration_url(current_settings())
    config: Config = current_app.extensions["migrate"].migrate.get_config()
    if url.startswith("sqlite"):
        with db.engine.connect() as conn:
            return _upgrade(config, conn, waited=False)
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            waited = not conn.scalar(select(func.pg_try_advisory_lock(LOCK_KEY)))
            if waited:
                log.info("another instance is migrating the schema: waiting for it")
                conn.execute(select(func.pg_advisory_lock(LOCK_KEY)))
            return _upgrade(config, conn, waited=waited)
    finally:
        engine.dispose()


def _upgrade(config: Config, conn: Connection, *, waited: bool) -> Upgrade:
    before = MigrationContext.configure(conn).get_current_heads()
    # Alembic commits its own transaction only on a connection that is not in one.
    conn.commit()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")
    after = MigrationContext.configure(conn).get_current_heads()
    conn.commit()
    return Upgrade(tuple(before), tuple(after), waited)
