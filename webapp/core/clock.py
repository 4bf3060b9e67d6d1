"""The one clock: the current time in UTC, and how times are written for clients.

Everything that reads the time calls ``utcnow``, or ``now_timestamp`` where a POSIX
timestamp is wanted (JWT claims, the expiry sealed in a cookie); tests freeze both with
freezegun. Every timestamp the database holds is timezone-aware UTC
(``models.UTCDateTime``). Durations and intervals (a request's time, a connection's age,
how long since the JWKS was refetched) are measured with ``time.monotonic`` or
``time.perf_counter`` instead: they are not readings of the wall clock, and must not jump
when it is set.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def now_timestamp() -> float:
    """Return the current time as POSIX seconds (``time.time()``), as JWT claims count it."""
    return time.time()


def iso_utc(moment: datetime) -> str:
    """Format as ISO-8601 UTC with milliseconds and ``Z``, as JavaScript's toISOString."""
    # isoformat is four times faster than strftime, and this runs on every session read;
    # its first 23 characters are "YYYY-MM-DDTHH:MM:SS.mmm", the offset is cut off.
    return moment.isoformat(timespec="milliseconds")[:23] + "Z"
