"""What the account page shows: the user (with a change of address pending), their ways in,
sessions, two-step verification and recent activity, all read in one round trip; and the
later pages of that activity, for "Show more".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select

from webapp.audit import trail
from webapp.audit.user_agents import describe_device
from webapp.core.clock import utcnow
from webapp.flows.account.profile import PENDING_COLUMNS, PendingChange, pending_change
from webapp.flows.account.ways_in import (
    LINKABLE_TYPES,
    EmailSignIn,
    LinkOption,
    PasskeyInfo,
    ShownUser,
    SignInMethod,
    account_gone,
    email_provider,
    email_signin,
    leaves_a_method,
    passkeys_offered,
)
from webapp.passkeys.relying_party import unavailable_reason
from webapp.providers import provider_name, providers
from webapp.second_factor import verification
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession
from webapp.storage.database import HotSelect, read_together
from webapp.storage.models import Account, Authenticator, Session, User


@dataclass(frozen=True)
class SessionInfo:
    id: int
    device: str
    ip: str | None
    created_at: datetime
    last_active_at: datetime
    provider: str | None
    current: bool


@dataclass(frozen=True)
class Overview:
    user: ShownUser
    accounts: list[SignInMethod]
    #: A link or code sent to the verified address signs the user in (None: it does not).
    email_signin: EmailSignIn | None
    #: Removing a provider or a passkey leaves a way in.
    can_unlink: bool
    link_options: list[LinkOption]
    sessions: list[SessionInfo]
    recently_signed_in: bool
    #: The re-authentication window, for the page's explanation.
    reauth_minutes: int
    passkeys: list[PasskeyInfo]
    #: Passkeys are on (AUTH_PASSKEYS): a passkey signs in and can be added.
    passkeys_offered: bool
    #: Why passkeys cannot be added at this address (None: they can).
    passkey_problem: str | None
    two_factor: verification.Status
    #: The address can be changed here: a link to the new one can be sent.
    email_change_offered: bool
    #: A change of address waiting for its link to be followed (None: none).
    email_change: PendingChange | None
    #: The latest events ("Recent activity"), when ``account_overview`` was asked for them.
    activity: Activity | None = None


#: What the account page reads, each one statement on the driver outside a transaction
#: (``HotSelect``), all in one round trip with recent activity's (``read_together``):
#: only the columns it shows, as rows, where ORM objects and the request's BEGIN/COMMIT
#: cost more than the queries.
#: The user with what two-step verification they have (``verification.STATUS_COLUMNS``)
#: and their pending change of address (``profile.PENDING_COLUMNS``).
_PAGE_USER = HotSelect(
    select(
        User.id,
        User.name,
        User.email,
        User.email_verified,
        User.image,
        User.created_at,
        *verification.STATUS_COLUMNS,
        *PENDING_COLUMNS,
    ).where(User.id == bindparam("user_id"))
)
_PAGE_ACCOUNTS = HotSelect(
    select(
        Account.id, Account.provider, Account.type, Account.provider_account_id, Account.created_at
    )
    .where(Account.user_id == bindparam("user_id"))
    .order_by(Account.id)
)
_PAGE_PASSKEYS = HotSelect(
    select(
        Authenticator.id,
        Authenticator.name,
        Authenticator.created_at,
        Authenticator.last_used_at,
        Authenticator.backed_up,
    )
    .where(Authenticator.user_id == bindparam("user_id"))
    .order_by(Authenticator.id)
)
_PAGE_SESSIONS = HotSelect(
    select(
        Session.id,
        Session.user_agent,
        Session.ip,
        Session.created_at,
        Session.last_active_at,
        Session.provider,
    )
    .where(Session.user_id == bindparam("user_id"), Session.expires > bindparam("now"))
    .order_by(Session.last_active_at.desc(), Session.id.desc())
)


def account_overview(*, user_id: int, session: AuthSession, activity: int = 0) -> Overview:
    """Return everything the account page shows for the signed-in user; with ``activity``,
    also their latest that many events, read in the same round trip."""
    reads: list[tuple[HotSelect, Mapping[str, Any]]] = [
        (_PAGE_USER, {"user_id": user_id}),
        (_PAGE_ACCOUNTS, {"user_id": user_id}),
        (_PAGE_PASSKEYS, {"user_id": user_id}),
        (_PAGE_SESSIONS, {"user_id": user_id, "now": utcnow()}),
    ]
    if activity:
        # One more than shown: whether there is a next page.
        reads.append(trail.latest_for_user(user_id, activity + 1))
    users, accounts, passkeys, rows, *events = read_together(*reads)
    if not users:
        raise account_gone()
    user = users[0]
    linked = {a.provider for a in accounts}
    return Overview(
        user=user,
        accounts=[SignInMethod.of(a, user) for a in accounts],
        email_signin=email_signin(user),
        # Removing a provider or a passkey: either leaves another way in, or neither.
        can_unlink=leaves_a_method(user, accounts, passkeys),
        link_options=[
            LinkOption(p.id, p.name)
            for p in providers().values()
            if p.type in LINKABLE_TYPES and p.id not in linked
        ],
        sessions=[
            SessionInfo(
                id=s.id,
                device=describe_device(s.user_agent),
                ip=s.ip,
                created_at=s.created_at,
                last_active_at=s.last_active_at,
                provider=s.provider,
                current=s.id == session.id,
            )
            # This browser's session first, then the most recently active.
            for s in sorted(rows, key=lambda s: s.id != session.id)
        ],
        recently_signed_in=reauthentication.is_recent(session),
        reauth_minutes=reauthentication.window_minutes(),
        passkeys=[PasskeyInfo.of(p) for p in passkeys],
        passkeys_offered=passkeys_offered(),
        passkey_problem=unavailable_reason(),
        two_factor=verification.Status.of(user),
        email_change_offered=email_provider() is not None,
        email_change=pending_change(user),
        activity=_activity(events[0], activity) if events else None,
    )


#: Entries the account page's "Recent activity" card shows: the latest few, as an
#: overview; its "Show more" brings the rest in pages of ``ACTIVITY_PAGE``.
ACTIVITY_FIRST = 5
#: Entries each "Show more" adds (and the activity page shows without JavaScript).
ACTIVITY_PAGE = 20


@dataclass(frozen=True)
class ActivityEntry:
    """One event of the user's, as "Recent activity" tells it (the wording is the
    template's)."""

    id: int
    occurred_at: datetime
    type: str
    failed: bool
    error_code: str | None
    #: The provider's name, if the event names one.
    provider: str | None
    device: str | None
    ip: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class Activity:
    """A page of the user's activity, newest first."""

    entries: list[ActivityEntry]
    #: Where the next page starts (the ``before`` of ``/account/activity``); None: no more.
    more: int | None


def recent_activity(
    *, user_id: int, before: int | None = None, limit: int = ACTIVITY_PAGE
) -> Activity:
    """Return the user's latest ``limit`` events (those before event ``before``, for the
    next page)."""
    return _activity(trail.for_user(user_id, before=before, limit=limit + 1), limit)


def _activity(rows: Sequence[Any], limit: int) -> Activity:
    """The first ``limit`` of ``rows`` (events as ``trail.for_user`` reads them, one more
    than asked for) as entries, and where the next page starts if there was one more."""
    entries = [
        ActivityEntry(
            id=row.id,
            occurred_at=row.occurred_at,
            type=row.type,
            failed=row.outcome == trail.FAILURE,
            error_code=row.error_code,
            provider=provider_name(row.provider) if row.provider else None,
            device=row.device,
            ip=row.ip,
            detail=dict(row.detail or {}),
        )
        for row in rows[:limit]
    ]
    return Activity(entries, entries[-1].id if len(rows) > limit else None)
