"""Database engine set-up: pool options per backend, and SQLite's pragmas."""

from __future__ import annotations

from typing import Any, cast

from flask import Flask
from sqlalchemy import CursorResult, Executable, event

from .extensions import db


def engine_options(
    url: str, *, pool_size: int = 10, max_overflow: int = 5, pre_ping: bool = False
) -> dict[str, Any]:
    """Return SQLAlchemy engine options for ``url``.

    The pool is per worker process: size it to the server's threads (``DB_POOL_SIZE``).
    Connections are recycled after 30 minutes so that none outlives a server-side or
    firewall idle timeout; ``pre_ping`` (``DB_POOL_PRE_PING``) costs a round trip per use.
    """
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 15}}
    return {
        "pool_pre_ping": pre_ping,
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        "pool_recycle": 1800,
        # Fail fast (503) instead of hanging a worker when the server is unreachable.
        "connect_args": {"connect_timeout": 5},
    }


def execute_counting(statement: Executable) -> int:
    """Run a DELETE or UPDATE in the current session; return how many rows it touched."""
    result = cast(CursorResult[Any], db.session.execute(statement))
    return int(result.rowcount)


def init_app(app: Flask) -> None:
    """Bind Flask-SQLAlchemy and make SQLite enforce foreign keys (ON DELETE CASCADE)."""
    db.init_app(app)
    with app.app_context():
        engine = db.engine
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling defers BEGIN until the first write, so a
    # SAVEPOINT issued first would start (and its RELEASE commit) a transaction of its
    # own. Take control: no implicit BEGIN from the driver, an explicit one from us.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # SQLite ignores foreign keys unless asked, per connection; WAL lets readers and the
    # single writer of the development server work at once.
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        # IMMEDIATE takes the write lock up front: a second writer waits (busy timeout)
        # instead of failing at once when two read-then-write transactions would deadlock.
        # Readers are not blocked (WAL), and the session hot path runs outside BEGIN.
        conn.exec_driver_sql("BEGIN IMMEDIATE")
