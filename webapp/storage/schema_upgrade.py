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

Our history records its revision in a version table of its own, ``auth_alembic_version``,
so that an application's own Alembic history can keep ``alembic_version`` in the same
database. A database migrated before that had ours in ``alembic_version``: the first
upgrade moves it over (``move_version_row``). Alembic itself is imported only here, by the
functions that run it: a server's worker never loads it.
"""

from __future__ import annotations

import ast
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.pool import NullPool

from webapp.settings import ConfigError, Settings, current_settings
from webapp.storage.db import db

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

#: Where our history records its revision (Alembic's own default is ``alembic_version``).
VERSION_TABLE = "auth_alembic_version"
#: Where databases migrated by earlier releases have it.
SHARED_VERSION_TABLE = "alembic_version"

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


def migrations_dir() -> Path:
    """The Alembic history: ``webapp/migrations`` in an installed package, else the
    checkout's ``migrations`` folder."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "migrations"
    return installed if installed.is_dir() else package.parent / "migrations"


@functools.cache
def code_revisions() -> tuple[frozenset[str], frozenset[str]]:
    """Every revision this release's history has, and its heads, read from the migration
    files' ``revision`` and ``down_revision`` (so that a worker need not load Alembic)."""
    known: set[str] = set()
    parents: set[str] = set()
    for path in (migrations_dir() / "versions").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            if not isinstance(target, ast.Name):
                continue
            if target.id == "revision":
                known.add(ast.literal_eval(node.value))
            elif target.id == "down_revision":
                value = ast.literal_eval(node.value)
                parents.update(value if isinstance(value, tuple) else [value] if value else [])
    return frozenset(known), frozenset(known - parents)


def schema_behind(conn: Connection) -> str | None:
    """Why the schema on ``conn`` is not ready for this release (None: it is at this
    release's revision, or at a newer release's, migrated ahead in a rolling deploy)."""
    known, heads = code_revisions()
    found: set[str] = set()
    if inspect(conn).has_table(VERSION_TABLE):
        found = set(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    if found == heads or (found and not found <= known):
        return None
    at = ", ".join(sorted(found)) or "nothing (never migrated)"
    needed = ", ".join(sorted(heads))
    return f"the schema is at {at}, this release needs {needed}: run flask auth migrate"


def alembic_config() -> Config:
    """Alembic's configuration for our history (no Flask-Migrate needed: an application
    may have its own for its own history)."""
    from alembic.config import Config

    folder = migrations_dir()
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    return config


def current_revisions(conn: Connection) -> tuple[str, ...]:
    """The revisions our version table records on ``conn`` (none: an empty schema)."""
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return tuple(context.get_current_heads())


def move_version_row(conn: Connection) -> None:
    """Move our revision from ``alembic_version`` to ``auth_alembic_version``, once: in a
    database migrated by an earlier release. Another history's row stays where it is; the
    shared table is dropped if ours was its only row. Runs in the caller's transaction."""
    from alembic.script import ScriptDirectory

    tables = inspect(conn)
    if tables.has_table(VERSION_TABLE) or not tables.has_table(SHARED_VERSION_TABLE):
        return
    history = ScriptDirectory.from_config(alembic_config())
    ours = {script.revision for script in history.walk_revisions()}
    shared = Table(SHARED_VERSION_TABLE, MetaData(), autoload_with=conn)
    found = [r for r in conn.scalars(select(shared.c.version_num)) if r in ours]
    if not found:
        return
    # As Alembic makes a version table: one column, its primary key named ``<table>_pkc``.
    moved = Table(
        VERSION_TABLE,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
    )
    moved.create(conn)
    conn.execute(moved.insert(), [{"version_num": r} for r in found])
    conn.execute(shared.delete().where(shared.c.version_num.in_(found)))
    if conn.scalar(select(func.count()).select_from(shared)) == 0:
        shared.drop(conn)
    log.info("moved the schema's revision %s to %s", ", ".join(found), VERSION_TABLE)


def upgrade_once() -> Upgrade:
    """Upgrade the schema to the newest revision, holding the migrations' lock (PostgreSQL)."""
    url = migration_url(current_settings())
    config = alembic_config()
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
    from alembic import command

    move_version_row(conn)
    before = current_revisions(conn)
    # Alembic commits its own transaction only on a connection that is not in one.
    conn.commit()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")
    after = current_revisions(conn)
    conn.commit()
    return Upgrade(before, after, waited)
