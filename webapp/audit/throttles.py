"""Fixed-window rate limits counted in the database, shared by every app instance.

Counters live in ``rate_limit_counters`` and are written on their own autocommit
connection, so a count survives the rollback of the failing flow that caused it, an app
restart, and is the same for every worker and instance on the database. Each hit is one
atomic upsert (INSERT … ON CONFLICT DO UPDATE … RETURNING), and callers decide on the count
it returns (``admit``): of any number of concurrent attempts exactly ``limit`` pass, where a
check-then-count would let a burst through. Fixed windows can admit up to twice the limit
across a window boundary; that is accepted for these abuse limits. A refusal tells which
limit refused and whether it is that key's first in its window (``Refusal``), so the
audit trail records a throttle once per key and window, not once per request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from ipaddress import IPv6Address, ip_address, ip_network

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from webapp.browser_state import known_browsers
from webapp.core.clock import utcnow
from webapp.core.keyed_hashes import keyed_hash
from webapp.metrics import events as metrics_events
from webapp.settings import RateLimit, current_settings
from webapp.storage import transactions
from webapp.storage.database import execute_counting
from webapp.storage.db import db
from webapp.storage.models import RateLimitCounter


def _window(limit: RateLimit, now: datetime) -> tuple[datetime, datetime]:
    seconds = int(limit.window.total_seconds())
    start = int(now.timestamp()) // seconds * seconds
    begin = datetime.fromtimestamp(start, UTC)
    return begin, begin + limit.window


def hit(key: str, limit: RateLimit, *, with_request: bool = False) -> tuple[int, datetime]:
    """Count one event for ``key`` in the current window; return the window's count and end.

    ``with_request``: in the request's transaction (see ``release``), so that the count
    stands or falls with what the request writes beside it.
    """
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
    if with_request:
        return int(db.session.execute(upsert).scalar_one()), end
    with db.engine.begin() as conn:
        return int(conn.execute(upsert).scalar_one()), end


@dataclass(frozen=True)
class Refusal:
    """The limit that refused an attempt, and the count its key reached in the window."""

    key: str
    limit: RateLimit
    count: int
    window_end: datetime

    @property
    def first(self) -> bool:
        """Whether this is the key's first refusal in its window: the one worth a record."""
        return self.count == self.limit.limit + 1

    @property
    def throttle(self) -> str:
        """The throttle's name: the key without what it counts (``credentials-ip``)."""
        return self.key.split(":", 1)[0]


#: The counters one attempt was counted on, as ``admit`` returns them for ``release``.
Counted = list[tuple[str, RateLimit]]


def admit(
    checks: Sequence[tuple[str, RateLimit]],
    *,
    refused: Callable[[Refusal], object] | None = None,
    with_request: bool = False,
) -> Counted | None:
    """Count one attempt against each (key, limit) in order; None once one is over.

    Returns the counted checks, for ``release`` when the attempt turns out not to count
    (a right password). The checks after the first one over are not counted: a refused
    attempt tried nothing, so it must not use up the broader allowances behind it.
    ``refused`` is told which limit refused (``audit.throttled`` records its first refusal
    in a window). ``with_request``: counted in the request's transaction (see ``hit``).
    """
    counted = []
    for key, limit in checks:
        counted.append((key, limit))
        count, window_end = hit(key, limit, with_request=with_request)
        if count > limit.limit:
            refusal = Refusal(key, limit, count, window_end)
            metrics_events.throttled(refusal.throttle)
            if refused is not None:
                refused(refusal)
            return None
    return counted


def release(checks: Sequence[tuple[str, RateLimit]], *, with_request: bool = False) -> None:
    """Take back one event from each counter (in its current window), never below zero.

    ``with_request``: in the request's transaction, for a flow that has written already
    (SQLite has one writer: a connection of its own would wait for the request's). The
    attempt then stays counted if the request's writes are discarded.
    """
    for key, limit in checks:
        start, _ = _window(limit, utcnow())
        statement = (
            update(RateLimitCounter)
            .where(
                RateLimitCounter.key == key,
                RateLimitCounter.window_start == start,
                RateLimitCounter.count > 0,
            )
            .values(count=RateLimitCounter.count - 1)
        )
        if with_request:
            db.session.execute(statement)
            continue
        with db.engine.begin() as conn:
            conn.execute(statement)


def left(checks: Sequence[tuple[str, RateLimit]]) -> int:
    """How many more attempts the counters ``admit`` counted on take in their current
    windows (the fewest of them), for a page that says how many tries are left."""
    now = utcnow()
    fewest = None
    for key, limit in checks:
        start, _ = _window(limit, now)
        count = db.session.execute(
            select(RateLimitCounter.count).where(
                RateLimitCounter.key == key, RateLimitCounter.window_start == start
            )
        ).scalar_one_or_none()
        room = max(0, limit.limit - int(count or 0))
        fewest = room if fewest is None else min(fewest, room)
    return 0 if fewest is None else fewest


def identifier_hash(identifier: str) -> str:
    """Return the keyed hash counters and cookies use for an identifier (an address).

    Keyed, so the counter table is no list of who tried to sign in, and the known-browser
    cookie names nobody.
    """
    return keyed_hash("throttle-identifier", identifier, length=32)


def admit_signin(
    scope: str,
    *,
    identifier: str,
    address: str | None,
    refused: Callable[[Refusal], object] | None = None,
    with_request: bool = False,
) -> Counted | None:
    """Count one sign-in attempt (``scope``: "credentials" or "email") for ``identifier``
    from ``address``; None when a limit is reached (see ``admit`` and ``_signin_checks``).
    ``with_request``: as for ``admit``, for a request that has written already."""
    conf = current_settings()
    limits = {
        "credentials": (
            conf.credentials_ip_limit,
            conf.credentials_identifier_ip_limit,
            conf.credentials_identifier_limit,
        ),
        "email": (conf.email_ip_limit, conf.email_address_ip_limit, conf.email_address_limit),
    }[scope]
    checks = _signin_checks(scope, identifier, address, *limits)
    return admit(checks, refused=refused, with_request=with_request)


def _signin_checks(
    scope: str,
    identifier: str,
    address: str | None,
    ip_limit: RateLimit,
    identifier_ip_limit: RateLimit,
    identifier_limit: RateLimit,
) -> list[tuple[str, RateLimit]]:
    """Return the (key, limit) checks of one sign-in attempt for ``identifier``, for ``admit``.

    A browser that has signed in as the identifier before counts on its own allowance, so
    nobody else can use it up. Any other browser counts per (identifier, client address)
    (strict), per client address and per identifier (looser), most specific first.
    """
    ident = identifier_hash(identifier)
    browser = known_browsers.browser_for(ident)
    if browser is not None:
        return [(f"{scope}-browser:{ident}:{browser}", identifier_ip_limit)]
    net = client_network(address)
    return [
        (f"{scope}-id-ip:{ident}:{net}", identifier_ip_limit),
        (f"{scope}-ip:{net}", ip_limit),
        (f"{scope}-id:{ident}", identifier_limit),
    ]


def client_key(throttle: str, address: str | None) -> str:
    """The key ``throttle`` counts this request's client under: its address (IPv6: /64)."""
    return f"{throttle}:{client_network(address)}"


def client_network(address: str | None) -> str:
    """Return what a per-client limit counts: the IPv4 address, or the IPv6 /64.

    One IPv6 subscriber gets a whole /64 (or more), so counting single IPv6 addresses
    would give each client 2**64 allowances.
    """
    try:
        parsed = ip_address(address or "")
    except ValueError:
        return address or "-"
    if isinstance(parsed, IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def delete_finished_windows() -> int:
    """Delete counters whose window has ended; return how many rows went."""
    deleted = execute_counting(
        delete(RateLimitCounter).where(RateLimitCounter.window_end <= utcnow())
    )
    transactions.commit()  # a maintenance command's own boundary
    return deleted
