"""The database settings: where it is, what stands before it, and the pool per worker.

Set-ups known to fail only under load or at a deploy (a transaction pooler's pitfalls)
are refused here, at start-up.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from webapp.settings.model import ConfigError, Settings
from webapp.settings.parsers import opt_str, parse_bool, parse_int
from webapp.settings.sources import Setting, Sources, declare

#: DATABASE_POOLER: what stands between the app and PostgreSQL. ``transaction``: a pooler
#: that hands each transaction to any server connection (PgBouncer ``pool_mode =
#: transaction``), so nothing may outlive a transaction on a connection (docs/scaling.md).
POOLERS = ("none", "transaction")

SETTINGS = declare(
    Setting(
        "DATABASE_URL",
        "database_url",
        "The database, as an SQLAlchemy URL: PostgreSQL (`postgresql://user:password@host/db`; "
        "`postgres://` is accepted, and both use psycopg 3) or SQLite (`sqlite:////path`).",
        default="required in production; in development the SQLite file "
        "`instance/webapp.sqlite3`; an embedding app's `SQLALCHEMY_DATABASE_URI`",
    ),
    Setting(
        "DATABASE_DIRECT_URL",
        "database_direct_url",
        "A connection straight to PostgreSQL, past a pooler: where `flask auth migrate` holds "
        "its lock and runs the migrations.",
        default="`DATABASE_URL`; required with `DATABASE_POOLER=transaction` and "
        "`MIGRATE_ON_START`",
    ),
    Setting(
        "DATABASE_POOLER",
        "database_pooler",
        "What stands between the app and PostgreSQL: `none`, or `transaction` for a pooler "
        "in transaction mode (PgBouncer `pool_mode = transaction`): no prepared statements, "
        "no state kept on a connection.",
        default="`none`",
    ),
    Setting(
        "MIGRATE_ON_START",
        None,
        "`scripts/serve` runs `flask auth migrate` before serving (one instance migrates, the "
        "others wait and find nothing to do).",
        field="migrate_on_start",
    ),
    Setting(
        "DB_POOL_SIZE",
        None,
        "Database connections each worker process keeps (at least 1): one per server thread.",
        field="db_pool_size",
    ),
    Setting(
        "DB_MAX_OVERFLOW",
        None,
        "Extra connections a worker may open under bursts, beyond `DB_POOL_SIZE` (at least 0).",
        field="db_max_overflow",
    ),
    Setting(
        "DB_POOL_PRE_PING",
        None,
        "Test every pooled connection, and every read connection, with `SELECT 1` before use: "
        "for networks that cut idle connections silently (it costs a round trip per read).",
        field="db_pool_pre_ping",
    ),
    Setting(
        "SQL_COUNT_HEADERS",
        None,
        "Add `X-SQL-Statements` and `X-SQL-Writes` to every response (the benchmark's "
        "per-request SQL count; off in normal operation).",
        field="sql_count_headers",
    ),
)


def read_database(sources: Sources, instance_path: Path, development: bool) -> dict[str, Any]:
    get, _ = sources.readers(SETTINGS)
    database_url = opt_str(get("DATABASE_URL"))
    if database_url is None:
        if not development:
            # A SQLite file in the instance folder is the first run's database: in
            # production it would be lost with the machine, and unseen by other instances.
            raise ConfigError(
                "DATABASE_URL is required outside development: a PostgreSQL URL, e.g."
                " postgresql://user:password@host/dbname (or sqlite:////path/to/file to"
                " choose SQLite on purpose)"
            )
        database_url = "sqlite:///" + str(instance_path.resolve() / "webapp.sqlite3")
    database_url = _checked("DATABASE_URL", _with_driver(database_url))
    database_direct_url = opt_str(get("DATABASE_DIRECT_URL"))
    if database_direct_url is not None:
        database_direct_url = _checked("DATABASE_DIRECT_URL", _with_driver(database_direct_url))
    pooler = str(get("DATABASE_POOLER") or "none").strip().lower()
    if pooler not in POOLERS:
        raise ConfigError(f"DATABASE_POOLER must be one of {', '.join(POOLERS)}; got {pooler!r}")
    migrate_on_start = bool(parse_bool("MIGRATE_ON_START", get("MIGRATE_ON_START")))
    _check_database_path(
        database_url,
        database_direct_url,
        transaction_pooler=pooler == "transaction",
        migrate_on_start=migrate_on_start,
    )
    return {
        "database_url": database_url,
        "database_direct_url": database_direct_url,
        "transaction_pooler": pooler == "transaction",
        "migrate_on_start": migrate_on_start,
        "db_pool_size": parse_int("DB_POOL_SIZE", get("DB_POOL_SIZE"), Settings.db_pool_size, 1),
        "db_max_overflow": parse_int(
            "DB_MAX_OVERFLOW", get("DB_MAX_OVERFLOW"), Settings.db_max_overflow, 0
        ),
        "db_pool_pre_ping": bool(parse_bool("DB_POOL_PRE_PING", get("DB_POOL_PRE_PING"))),
        "sql_count_headers": bool(parse_bool("SQL_COUNT_HEADERS", get("SQL_COUNT_HEADERS"))),
    }


def _checked(name: str, url: str) -> str:
    """Refuse a URL SQLAlchemy cannot read, a database other than PostgreSQL or SQLite, a
    driver other than psycopg 3, and PostgreSQL without psycopg installed: each in one
    line naming the setting, never its value (which holds a password)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            f"{name} is not a database URL: expected postgresql://user:password@host/dbname"
            " or sqlite:////path/to/file"
        ) from None
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if backend not in ("postgresql", "sqlite"):
        raise ConfigError(
            f"{name} names {backend}, which is not supported: use PostgreSQL"
            " (postgresql://…) or SQLite (sqlite:///…)"
        )
    if backend == "postgresql" and driver != "psycopg":
        raise ConfigError(f"{name} names the driver {driver}: use postgresql://… (psycopg 3)")
    if backend == "postgresql" and importlib.util.find_spec("psycopg") is None:
        raise ConfigError(
            f"{name} is a PostgreSQL URL, but psycopg is not installed: install"
            " webapp-signin[postgres]"
        )
    return url


def _with_driver(url: str) -> str:
    """Name the driver we ship (psycopg 3) in a PostgreSQL URL, so a plain libpq URL works."""
    if url.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _check_database_path(
    url: str, direct_url: str | None, *, transaction_pooler: bool, migrate_on_start: bool
) -> None:
    """Refuse the database set-ups known to fail, each only under load or at a deploy.

    Behind a transaction pooler consecutive transactions may run on different server
    connections: the migrations' advisory lock must be taken past it, and nothing that
    sets state for a whole connection (startup ``options``, prepared statements) may be
    asked for. Only hosts and ports are compared; credentials never reach a message.
    """
    if direct_url is not None and not direct_url.startswith("postgresql"):
        raise ConfigError("DATABASE_DIRECT_URL must be a PostgreSQL URL (postgresql://…)")
    if not transaction_pooler:
        return
    if not url.startswith("postgresql"):
        raise ConfigError("DATABASE_POOLER=transaction needs a PostgreSQL DATABASE_URL")
    query = parse_qs(urlsplit(url).query)
    if "prepare_threshold" in query:
        raise ConfigError(
            "DATABASE_URL sets prepare_threshold, but behind a transaction pooler "
            "(DATABASE_POOLER=transaction) a statement prepared on one server connection "
            "is missing on the next: remove it (the app turns prepared statements off)"
        )
    if "options" in query:
        raise ConfigError(
            "DATABASE_URL sets options, which a transaction pooler does not pass on to each "
            "server connection (PgBouncer refuses them): set them on the role or database "
            "instead (ALTER ROLE … SET …)"
        )
    if migrate_on_start and direct_url is None:
        raise ConfigError(
            "MIGRATE_ON_START with DATABASE_POOLER=transaction needs DATABASE_DIRECT_URL: "
            "the migrations' lock is held on a connection straight to PostgreSQL, which a "
            "transaction pooler cannot keep"
        )
    if direct_url is not None and _host_port(direct_url) == _host_port(url):
        raise ConfigError(
            "DATABASE_DIRECT_URL names the same host and port as DATABASE_URL, which is the "
            "transaction pooler: it must reach PostgreSQL directly"
        )


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or 5432)
