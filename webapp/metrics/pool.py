"""The database pool's use: connections in use, from SQLAlchemy's pool events.

Each time a connection is taken from the pool, given back or detached, the gauge is set
from the pool's own count (one process's pool; the exposition sums the workers'). The hot
reads' connections (``storage.database.ReadConnections``), detached from the pool once
opened, count only while they are being opened.
"""

from __future__ import annotations

import weakref
from typing import Any

from flask import Flask
from sqlalchemy import Engine, event

from webapp.metrics.families import DB_POOL_CHECKOUTS, DB_POOL_IN_USE, DB_POOL_SIZE
from webapp.storage.db import db

#: The engines watched already (an app built twice on one engine is watched once).
_watched: weakref.WeakSet[Engine] = weakref.WeakSet()


def init_app(app: Flask) -> None:
    """Watch the pool of ``app``'s engine (and the one it makes anew on ``dispose``, which
    keeps the listeners)."""
    with app.app_context():
        engine = db.engine
    if engine in _watched:
        return
    _watched.add(engine)
    held = weakref.ref(engine)

    def note(returning: int = 0) -> None:
        watched = held()
        in_use = getattr(watched.pool if watched is not None else None, "checkedout", None)
        if callable(in_use):  # not a pool that keeps no count
            DB_POOL_IN_USE.set(in_use() - returning)

    def taken(*_args: Any) -> None:
        DB_POOL_CHECKOUTS.inc()
        note()

    def given_back(*_args: Any) -> None:
        note(returning=1)  # told before the pool takes it back

    event.listen(engine.pool, "checkout", taken)
    event.listen(engine.pool, "checkin", given_back)
    event.listen(engine.pool, "detach", lambda *_args: note())
    size = getattr(engine.pool, "size", None)
    if callable(size):
        DB_POOL_SIZE.set(size())
