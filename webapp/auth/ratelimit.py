"""Fixed-window rate limits counted in the database, shared by every app instance.

Counters live in ``rate_limit_counters`` and are written on their own autocommit
connection, so a count survives the rollback of the failing flow that caused it, an app
restart, and is the same for every worker and instance on the database. Each hit is one
atomic upsert (INSERT … ON CONFLICT DO UPDATE … RETURNING). Fixed windows can admit up to
twice the limit across a window boundary; that is accepted for these abuse limits.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from ..database import execute_counting
from ..extensions import db
from ..models import RateLimitCounter, utcnow
from ..settings import RateLimit


def _window(limit: RateLimit, now: datetime) -> tuple[datetime, datetime]:
    seconds = int(limit.window.total_seconds())
    start = int(now.timestamp()) // seconds * seconds
    begin = datetime.fromtimestamp(start, UTC)
    return begin, begin + limit.window


def hit(key: str, limit: RateLimit) -> int:
    """Count one event for ``key`` in the current window; return the window's count."""
    start, end = _window(limit, utcnow())
    dialect = db.engine.dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    upsert = (
        insert(RateLimitCounter)
        .values(key=key, window_start=start, window_end=end, count=1)
        .on_conflict_do_update(
            index_elements=["key", "window_start"],
            set_={"count": RateLimitCounter.count + 1},
        )
        .returning(RateLimitCounter.count)
    )
    with db.engine.begin() as conn:
        return int(conn.execute(upsert).scalar_one())


def count(key: str, limit: RateLimit) -> int:
    """Return how many events ``key`` has in the current window."""
    start, _ = _window(limit, utcnow())
    with db.engine.connect() as conn:
        value = conn.execute(
            select(RateLimitCounter.count).where(
                RateLimitCounter.key == key, RateLimitCounter.window_start == start
            )
        ).scalar_one_or_none()
    return int(value or 0)


def exceeded(key: str, limit: RateLimit) -> bool:
    """Return whether ``key`` has used up its allowance in the current window."""
    return count(key, limit) >= limit.limit


def delete_finished_windows() -> int:
    """Delete counters whose window has ended; return how many rows went."""
    deleted = execute_counting(
        delete(RateLimitCounter).where(RateLimitCounter.window_end <= utcnow())
    )
    db.session.commit()
    return deleted
