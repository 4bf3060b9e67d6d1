"""Database engine set-up: pool options per backend, and SQLite's pragmas."""

from __future__ import annotations

from typing import Any

from flask import Flask
from sqlalchemy import event

from .extensions import db


def engine_options(url: str) -> dict[str, Any]:
    """Return SQLAlchemy engine options for ``url``."""
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 15}}
    return {"pool_pre_ping": True, "pool_size": 10, "max_overflow": 5, "pool_recycle": 1800}


def init_app(app: Flask) -> None:
    """Bind Flask-SQLAlchemy and make SQLite enforce foreign keys (ON DELETE CASCADE)."""
    db.init_app(app)
    with app.app_context():
        engine = db.engine
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # SQLite ignores foreign keys unless asked, per connection; WAL lets readers and the
    # single writer of the development server work at once.
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()
