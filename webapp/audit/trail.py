"""The audit trail: what happened to an account or a sign-in attempt, one row each in
``auth_events`` (docs/audit.md).

``record`` is the one way the flows write it. A success is written in the caller's
transaction, so it stands or falls with what it tells of. A failure is written whatever
becomes of the request's other writes (``transactions.write_regardless``): an error
handler that discards them keeps the failure's row, and a refused request costs that one
INSERT. A write that commits on a connection of its own (a session's daily extension, a
provider token's refresh) puts ``event_row(...).insert`` into its own transaction and calls
``announce()`` once that is committed. Nothing here runs on the hot session read.

Nothing a signed-out client sends grows the trail without bound. A failure that names no
user is counted first against its client address's allowance (``AUDIT_FAILURE_IP_LIMIT``,
in the same transaction as its row); a throttle's refusals (``throttled``) are one row per
key and window. Past either, the first refusal is one ``signin.throttled`` row saying which
limit and until when, and the others only a log line. A failure naming a user is always
written: it is bounded by that user's own throttles, and the person must see it.

A row never holds a token, code, password or hash of one. An address or identifier that
names no user is kept only as its keyed hash (``subject_hash``: the throttles' HMAC under a
key derived from AUTH_SECRET), so the table is no list of who tried what; ``detail`` takes
a few short values the code chooses, never text from the request.

The Blinker signals (``hooks``) tell the embedding application after the commit; the trail
is written beside them, in the same transaction as the change. Its own signal,
``audit_event``, tells of each row once it is committed: ``record`` queues it after the
commit of the row's transaction, and a savepoint rolled back (a first sign-in lost to a
race) takes the announcements of the rows written in it along.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from ipaddress import IPv6Address, ip_address, ip_network
from typing import Any

from flask import g, has_request_context, request
from sqlalchemy import ColumnElement, Insert, bindparam, insert, or_, select, tuple_
from sqlalchemy.event import listens_for
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm import SessionTransaction

from webapp.audit import throttles
from webapp.audit.throttles import Refusal, identifier_hash
from webapp.audit.user_agents import device_label
from webapp.core.clock import iso_utc, utcnow
from webapp.core.hooks import audit_event
from webapp.mail.email_addresses import address_or_none
from webapp.settings import current_settings
from webapp.storage import transactions
from webapp.storage.database import HotSelect, delete_in_batches
from webapp.storage.db import db
from webapp.storage.models import AuthEvent, User
from webapp.telemetry import logsafe
from webapp.telemetry.logs import current_request_id

log = logging.getLogger(__name__)


class Event(StrEnum):
    """What happened: the ``type`` column."""

    SIGNIN = "signin"
    SIGNOUT = "signout"
    SESSION_EXTENDED = "session.extended"
    SESSION_REVOKED = "session.revoked"
    #: A throttle's first refusal of a key in its window (a credentials attempt, an e-mail
    #: request, a device sign-in, a passkey ceremony, a code exchange, the trail's own
    #: allowance of failures); ``detail``: ``throttle``, ``limit``, ``until``.
    THROTTLED = "signin.throttled"
    EMAIL_REQUESTED = "email.requested"
    EMAIL_CONFIRMED = "email.confirmed"
    EMAIL_REFUSED = "email.refused"
    #: A signed-in person asked to change their address: a link went to the new one (which
    #: the row never names); ``detail.again``: the link of a pending change sent anew.
    EMAIL_CHANGE_REQUESTED = "email.change_requested"
    #: The link was followed and the address replaced; a failure: a link refused
    #: (``EmailChangeLink``) or an address another user has (``EmailInUse``).
    EMAIL_CHANGED = "email.changed"
    #: A wrong one-time code (e-mail) or second-factor code.
    CODE_FAILED = "code.failed"
    #: Too many wrong codes: the e-mail request burnt, or second-factor codes paused.
    CODE_LOCKOUT = "code.lockout"
    ACCOUNT_CREATED = "account.created"
    ACCOUNT_LINKED = "account.linked"
    ACCOUNT_UNLINKED = "account.unlinked"
    ACCOUNT_DELETED = "account.deleted"
    PASSKEY_ADDED = "passkey.added"
    PASSKEY_REMOVED = "passkey.removed"
    #: Two-step verification (the authenticator app) turned on or off; ``detail.by``.
    SECOND_FACTOR_ON = "second_factor.on"
    SECOND_FACTOR_OFF = "second_factor.off"
    #: A recovery code passed a sign-in's second factor (never the code); ``detail.left``.
    RECOVERY_CODE_USED = "recovery.used"
    #: New recovery codes replaced the old ones.
    RECOVERY_CODES_REPLACED = "recovery.replaced"
    TOKEN_REFRESHED = "token.refreshed"
    TOKEN_REVOKED = "token.revoked"


SUCCESS = "success"
FAILURE = "failure"

#: Why sessions were revoked (``detail.reason`` of ``session.revoked``); the first and
#: ``OPERATOR`` also say who turned the second factor off (``detail.by``).
BY_USER = "user"
OTHERS = "others"
BACKCHANNEL = "backchannel"
EXPIRED = "expired"
LIMIT = "limit"
OPERATOR = "operator"

#: Failure codes of the trail's own, where no error code of docs/errors.md says it.
RATE_LIMITED = "RateLimited"
WRONG_CODE = "WrongCode"
REVOCATION_FAILED = "RevocationFailed"
REVOCATION_UNSUPPORTED = "RevocationUnsupported"

#: Shown to operators, not in a person's "Recent activity" (one a day per session).
NOT_SHOWN_TO_PEOPLE = frozenset({Event.SESSION_EXTENDED})

#: What a device label may not keep (see ``this_device``).
_LABEL_UNSAFE = re.compile(r"[^\w ()+-]")
#: Longest string kept in ``detail`` (values are the code's: ids, names, counts).
_DETAIL_TEXT = 100
Detail = Mapping[str, str | int | bool | None]


@dataclass(frozen=True)
class EventRow:
    """One event as the trail writes it: ``insert`` is its INSERT, ``announce`` sends the
    ``audit_event`` signal of it (call it once that INSERT is committed)."""

    type: Event
    occurred_at: datetime
    error_code: str | None
    user_id: int | None
    subject_hash: str | None
    provider: str | None
    ip: str | None
    device: str | None
    request_id: str | None
    detail: Mapping[str, str | int | bool | None] | None

    @property
    def outcome(self) -> str:
        return SUCCESS if self.error_code is None else FAILURE

    @property
    def insert(self) -> Insert:
        # Through the users table: a user deleted meanwhile (a pending sign-in's, a session's
        # on another device) leaves the row naming nobody, where the id would break the key.
        user = (
            None
            if self.user_id is None
            else select(User.id).where(User.id == self.user_id).scalar_subquery()
        )
        return insert(AuthEvent).values(**self._columns(), type=self.type.value, user_id=user)

    def announce(self) -> None:
        """Send ``audit_event`` (``webapp.core.hooks``) for this row: its type as the sender,
        its other columns as arguments."""
        audit_event.send(self.type.value, **self._columns(), user_id=self.user_id)

    def _columns(self) -> dict[str, Any]:
        """The row's columns but its type and user, which the INSERT and the signal give
        each in their own form."""
        return {
            "occurred_at": self.occurred_at,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "subject_hash": self.subject_hash,
            "provider": self.provider,
            "ip": self.ip,
            "device": self.device,
            "request_id": self.request_id,
            # A copy each time: what one listener does to it is no other's concern.
            "detail": None if self.detail is None else dict(self.detail),
        }


def event_row(
    event: Event,
    *,
    user_id: int | None = None,
    subject: str | None = None,
    provider: str | None = None,
    error: str | None = None,
    detail: Detail | None = None,
) -> EventRow:
    """Return one event to write; the request (if any) gives address, device and id.

    ``subject``: the address or identifier an event names when it names no user, kept as
    its keyed hash. ``error``: the failure's code (none: a success).
    """
    if user_id is not None and subject is not None:
        raise ValueError("an event names a user or a subject, not both")
    ip = device = request_id = None
    if has_request_context():
        ip = this_address()
        device = this_device()
        request_id = current_request_id()
    return EventRow(
        type=event,
        occurred_at=utcnow(),
        error_code=error,
        user_id=user_id,
        subject_hash=subject_hash(subject) if subject is not None else None,
        provider=provider,
        ip=ip,
        device=device,
        request_id=request_id,
        detail=_checked(detail),
    )


def record(
    event: Event,
    *,
    user_id: int | None = None,
    subject: str | None = None,
    provider: str | None = None,
    error: str | None = None,
    detail: Detail | None = None,
) -> None:
    """Record one event: a success in the current transaction, a failure whatever becomes
    of the request's writes (outside a request, a command's: in its transaction)."""
    row = event_row(
        event, user_id=user_id, subject=subject, provider=provider, error=error, detail=detail
    )
    if error is None or not has_request_context():
        _write(row)
        return
    g.audit_refused = True
    if user_id is not None:
        transactions.write_regardless(lambda: _write(row))
    else:
        transactions.write_regardless(lambda: _write_failure(row, f"{event.value} ({error})"))


def throttled(refusal: Refusal, *, subject: str | None = None, provider: str | None = None) -> None:
    """Record a throttle's refusal of this request (``throttles.admit``'s ``refused``): the
    key's first in its window as one ``signin.throttled`` row, whatever becomes of the
    request's writes; every one as a log line."""
    g.audit_refused = True
    row = _refusal_row(refusal, "a request", subject=subject, provider=provider)
    if row is not None:
        transactions.write_regardless(lambda: _write(row))


def _write(row: EventRow) -> None:
    """Write ``row`` in the request's (or command's) transaction; announce it once that is
    committed, unless the savepoint it was written in is rolled back before."""
    db.session.execute(row.insert)
    savepoint = db.session().get_nested_transaction()
    transactions.on_commit(lambda: None if _rolled_back(savepoint) else row.announce())


#: The savepoints rolled back, per ORM session, for as long as something refers to them.
_ROLLED_BACK = "webapp.audit.rolled_back_savepoints"


@listens_for(OrmSession, "after_soft_rollback")
def _remember_rolled_back(session: OrmSession, previous_transaction: SessionTransaction) -> None:
    if previous_transaction.nested:
        session.info.setdefault(_ROLLED_BACK, weakref.WeakSet()).add(previous_transaction)


def _rolled_back(savepoint: SessionTransaction | None) -> bool:
    """Whether ``savepoint`` or one it was nested in was rolled back (None: none)."""
    undone = db.session().info.get(_ROLLED_BACK, ())
    while savepoint is not None:
        if savepoint in undone:
            return True
        savepoint = savepoint.parent
    return False


def _write_failure(row: EventRow, what: str) -> None:
    """Write a failure's row if its client address's allowance has room; count it in the
    same transaction, so that the count and the row stand or fall together."""

    def refused(refusal: Refusal) -> None:
        own = _refusal_row(refusal, f"the record of {what}")
        if own is not None:
            _write(own)

    allowance = (
        throttles.client_key("audit-ip", request.remote_addr),
        current_settings().audit_failure_ip_limit,
    )
    if throttles.admit([allowance], refused=refused, with_request=True) is not None:
        _write(row)


def _refusal_row(
    refusal: Refusal, what: str, *, subject: str | None = None, provider: str | None = None
) -> EventRow | None:
    """Log a refusal; return its row if it is its key's first in the window, else None."""
    limit = refusal.limit
    log.info(
        "%s refused by the %s throttle (%d per %d s) from %s%s",
        what,
        refusal.throttle,
        limit.limit,
        limit.window.total_seconds(),
        logsafe.encode(request.remote_addr),
        "" if refusal.first else "; recorded once already in this window",
    )
    if not refusal.first:
        return None
    detail: Detail = {
        "throttle": refusal.throttle,
        "limit": limit.limit,
        "until": iso_utc(refusal.window_end),
    }
    return event_row(
        Event.THROTTLED, subject=subject, provider=provider, error=RATE_LIMITED, detail=detail
    )


def refusal_recorded() -> bool:
    """Whether this request has recorded a failure already (the error handler's generic
    sign-in failure is then left out: the flow's own says more)."""
    return bool(g.get("audit_refused"))


def subject_hash(identifier: str) -> str:
    """The keyed hash an event keeps of an address or identifier: of its normal form, so
    ``Ann@Example.com`` and ``ann@example.com`` are one subject."""
    return identifier_hash(address_or_none(identifier) or identifier.strip().lower())


def this_address() -> str | None:
    """This request's client address, as events and notices name it (None: unknown)."""
    return (request.remote_addr or "")[:45] or None


def this_device() -> str:
    """This request's device as the trail names it: browser and system, no version.

    The user agent is read as far as a session keeps one (a client chooses its length).
    Some of its parser's families are words taken from the user agent (a bot's name): only
    letters, digits, spaces and ``()+-`` are kept, so that no address or URL a client sends
    reaches a notice, where mail programs would make it a link.
    """
    agent = request.headers.get("User-Agent", "")[: current_settings().user_agent_max_length]
    label = _LABEL_UNSAFE.sub("", device_label(agent))
    return " ".join(label.split())[:128] or "Unknown device"


def _checked(detail: Detail | None) -> dict[str, str | int | bool | None] | None:
    if not detail:
        return None
    checked: dict[str, str | int | bool | None] = {}
    for key, value in detail.items():
        if value is not None and not isinstance(value, str | int | bool):
            raise TypeError(f"detail {key!r}: {type(value).__name__} is not a plain value")
        checked[key] = value[:_DETAIL_TEXT] if isinstance(value, str) else value
    return checked


# -- reading it ----------------------------------------------------------------------------


def network(address: str | None) -> str:
    """The network a client address belongs to, as "the same place" for the new-device
    check: an IPv4 /24, an IPv6 /48 (an IPv4-mapped address as IPv4)."""
    try:
        parsed = ip_address(address or "")
    except ValueError:
        return address or ""
    if isinstance(parsed, IPv6Address):
        if parsed.ipv4_mapped is None:
            return str(ip_network(f"{parsed}/48", strict=False))
        parsed = parsed.ipv4_mapped
    return str(ip_network(f"{parsed}/24", strict=False))


def is_new_device(user_id: int, *, within: timedelta) -> bool:
    """Whether this request's device (browser, system and network) has not signed in as
    the user within ``within``, while the trail knows an earlier sign-in of theirs.

    Without one there is nothing to compare with (a new user, or sign-ins older than the
    trail or its retention): not new. Call it before recording the sign-in itself.
    """
    signins = select(AuthEvent.ip).where(
        AuthEvent.user_id == user_id,
        AuthEvent.type == Event.SIGNIN.value,
        AuthEvent.outcome == SUCCESS,
    )
    here = network(request.remote_addr)
    seen = db.session.scalars(
        signins.where(
            AuthEvent.occurred_at > utcnow() - within, AuthEvent.device == this_device()
        ).distinct()
    )
    if any(network(ip) == here for ip in seen):
        return False
    return db.session.execute(signins.limit(1)).first() is not None


#: What a person is shown of an event (``for_user``): not the request id or the subject hash.
SHOWN_COLUMNS = (
    AuthEvent.id,
    AuthEvent.occurred_at,
    AuthEvent.type,
    AuthEvent.outcome,
    AuthEvent.error_code,
    AuthEvent.provider,
    AuthEvent.device,
    AuthEvent.ip,
    AuthEvent.detail,
)


_SHOWN = select(*SHOWN_COLUMNS).where(
    AuthEvent.user_id == bindparam("user_id"),
    AuthEvent.type.not_in([event.value for event in NOT_SHOWN_TO_PEOPLE]),
)
_NEWEST_FIRST = (AuthEvent.occurred_at.desc(), AuthEvent.id.desc())
#: The account page's reads, on the driver outside a transaction (``HotSelect``).
_FIRST_PAGE = HotSelect(_SHOWN.order_by(*_NEWEST_FIRST).limit(bindparam("limit")))
_NEXT_PAGE = HotSelect(
    _SHOWN.where(
        # Typed: in a tuple a parameter takes no type from its column, and SQLite compares
        # the stored text of a time, which only the column's type writes the same way.
        tuple_(AuthEvent.occurred_at, AuthEvent.id)
        < tuple_(
            bindparam("at", type_=AuthEvent.occurred_at.type),
            bindparam("id", type_=AuthEvent.id.type),
        )
    )
    .order_by(*_NEWEST_FIRST)
    .limit(bindparam("limit"))
)
_POSITION = HotSelect(
    select(AuthEvent.occurred_at, AuthEvent.id).where(
        AuthEvent.id == bindparam("id"), AuthEvent.user_id == bindparam("user_id")
    )
)


def latest_for_user(user_id: int, limit: int) -> tuple[HotSelect, dict[str, Any]]:
    """The read of the user's latest ``limit`` events (``for_user``'s first page), as
    ``database.read_together`` takes it: the account page sends it with its other reads."""
    return _FIRST_PAGE, {"user_id": user_id, "limit": limit}


def for_user(user_id: int, *, before: int | None, limit: int) -> Sequence[Any]:
    """The user's events a person is shown (``SHOWN_COLUMNS``, as rows), newest first, at
    most ``limit``; ``before``: only those older than that event of theirs (the next page)."""
    if before is None:
        latest, params = latest_for_user(user_id, limit)
        return latest.all(params)
    after = _POSITION.first({"id": before, "user_id": user_id})
    if after is None:
        return []
    return _NEXT_PAGE.all(
        {"user_id": user_id, "at": after.occurred_at, "id": after.id, "limit": limit}
    )


def search(
    *,
    user_ids: Sequence[int] = (),
    subject: str | None = None,
    since: datetime | None = None,
    types: Sequence[Event] = (),
    limit: int | None = None,
) -> list[tuple[AuthEvent, str | None]]:
    """Events for operators with the user's address, the newest ``limit`` (None: all), in
    time order. ``user_ids`` and ``subject`` (an address) together: events of those users,
    or about that address while it named no user."""
    query = select(AuthEvent, User.email).outerjoin(User, User.id == AuthEvent.user_id)
    if user_ids or subject is not None:
        who: list[ColumnElement[bool]] = [AuthEvent.user_id.in_(list(user_ids))]
        if subject is not None:
            who.append(AuthEvent.subject_hash == subject_hash(subject))
        query = query.where(or_(*who))
    if since is not None:
        query = query.where(AuthEvent.occurred_at >= since)
    if types:
        query = query.where(AuthEvent.type.in_([t.value for t in types]))
    query = query.order_by(AuthEvent.occurred_at.desc(), AuthEvent.id.desc()).limit(limit)
    return [(event, email) for event, email in reversed(db.session.execute(query).all())]


def delete_older_than(retention: timedelta, *, batch_size: int) -> int:
    """Delete the events older than ``retention`` in batches; return how many went."""
    cutoff = utcnow() - retention
    return delete_in_batches(AuthEvent.id, AuthEvent.occurred_at < cutoff, batch_size=batch_size)
