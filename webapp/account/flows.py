"""Account use cases: what the account pages and JSON endpoints do, without HTTP.

Each flow takes the signed-in user's id (and session where it matters), checks ownership
itself (a row of another user is "not found", never acted on), raises ``AccountError``
with a stable code (webapp/auth/errors.py), and never commits: the request's writes are
committed when it ends (webapp/transactions.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import bindparam, delete, select

from webapp.auth import audit, notices, reauth, second_factor
from webapp.auth.devices import describe_device
from webapp.auth.errors import AccountError
from webapp.auth.flows.passkey import PROVIDER_ID as PASSKEY_PROVIDER
from webapp.auth.flows.provider_tokens import revoke_tokens
from webapp.auth.passkeys import clean_name, unavailable_reason
from webapp.auth.providers import provider_name, providers
from webapp.auth.sessions import AuthSession, end_current_session
from webapp.clock import utcnow
from webapp.database import HotSelect, execute_counting, read_together
from webapp.extensions import db
from webapp.i18n import gettext, ngettext
from webapp.models import (
    Account,
    Authenticator,
    RecoveryCode,
    Session,
    TotpAuthenticator,
    User,
    VerificationToken,
)

#: Provider types a signed-in person can link with one button (a redirect round trip).
LINKABLE_TYPES = frozenset({"oidc", "oauth"})
#: What the person must type to confirm deleting the account.
DELETE_CONFIRMATION = "DELETE"


NOT_FOUND = "NotFound"
LAST_METHOD = "LastSignInMethod"
REAUTH_REQUIRED = "RecentSignInRequired"
NOT_CONFIRMED = "ConfirmationRequired"
#: Removing the e-mail sign-in that comes with the verified address (it would come back).
EMAIL_KEPT = "EmailSignInKept"


class ShownUser(Protocol):
    """What the account area reads of a user: a ``User`` or a row of those columns."""

    id: int
    name: str | None
    email: str | None
    email_verified: datetime | None
    image: str | None
    created_at: datetime


class ShownAccount(Protocol):
    """What the account area reads of a linked account: an ``Account`` or such a row."""

    id: int
    provider: str
    type: str
    provider_account_id: str
    created_at: datetime


class ShownPasskey(Protocol):
    """What the account area reads of a passkey: an ``Authenticator`` or such a row."""

    id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    backed_up: bool


@dataclass(frozen=True)
class SignInMethod:
    """One of the user's ways to sign in, as the account area lists it (an Account row)."""

    id: int
    provider: str
    provider_name: str
    type: str
    created_at: datetime
    #: The e-mail provider's row for the user's verified address. E-mail sign-in follows
    #: from the address itself (a link to it finds this user, row or not, and writes the row
    #: again), so removing the row would change nothing: the page shows it as the e-mail
    #: way in, never with "Remove", and ``unlink_account`` refuses it.
    follows_address: bool = False


@dataclass(frozen=True)
class EmailSignIn:
    """E-mail sign-in as one of the user's ways in: a link or code sent to the address."""

    provider_id: str
    provider_name: str
    address: str


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
class LinkOption:
    id: str
    name: str


@dataclass(frozen=True)
class PasskeyInfo:
    """One of the user's passkeys, as the account page lists it."""

    id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    #: Synced to the person's other devices (a cloud account), or bound to one device.
    synced: bool


def _passkey_info(row: ShownPasskey) -> PasskeyInfo:
    return PasskeyInfo(row.id, row.name, row.created_at, row.last_used_at, row.backed_up)


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
    two_factor: second_factor.Status
    #: The latest events ("Recent activity"), when ``account_overview`` was asked for them.
    activity: Activity | None = None


def _method(account: ShownAccount, user: ShownUser) -> SignInMethod:
    return SignInMethod(
        account.id,
        account.provider,
        provider_name(account.provider),
        account.type,
        account.created_at,
        follows_address=_follows_address(account, user),
    )


def sign_in_method(*, user_id: int, account_id: int) -> SignInMethod | None:
    """Return one of the user's sign-in methods, or None if it is not theirs (or gone)."""
    user = db.session.get(User, user_id)
    account = next((a for a in _accounts(user_id) if a.id == account_id), None)
    return _method(account, user) if account is not None and user is not None else None


def _email_signin(user: ShownUser) -> EmailSignIn | None:
    """E-mail sign-in for ``user``, when a link or code sent to their address signs them
    in: an e-mail provider is configured and the address is verified. A link to an
    unverified address signs in a new user of its own, never this one (the linking rules,
    webapp/auth/flows/linking.py), so it is no way in here."""
    if not user.email or user.email_verified is None:
        return None
    provider = next((p for p in providers().values() if p.type == "email"), None)
    if provider is None:
        return None
    return EmailSignIn(provider.id, provider.name, user.email)


def _follows_address(account: ShownAccount, user: ShownUser) -> bool:
    """Whether ``account`` is an e-mail provider's row for the user's verified address."""
    provider = providers().get(account.provider)
    return (
        provider is not None
        and provider.type == "email"
        and user.email_verified is not None
        and account.provider_account_id == user.email
    )


def _accounts(user_id: int) -> list[Account]:
    return list(
        db.session.scalars(select(Account).where(Account.user_id == user_id).order_by(Account.id))
    )


def _passkeys(user_id: int) -> list[Authenticator]:
    return list(
        db.session.scalars(
            select(Authenticator).where(Authenticator.user_id == user_id).order_by(Authenticator.id)
        )
    )


def _locked_user(user_id: int) -> User | None:
    """The user's row, locked until the request's writes are committed: removals of one
    user's ways in are decided one at a time, each seeing what the one before removed
    (the "last method" check and the delete would otherwise both pass in two parallel
    requests). PostgreSQL: ``SELECT … FOR NO KEY UPDATE``, which new rows naming the user
    (a session, an event) do not wait for. SQLite has one writer: the request's first
    statement took its lock (``BEGIN IMMEDIATE``, webapp/database.py). Read the user's
    methods after this, never before."""
    return db.session.get(User, user_id, with_for_update={"key_share": True})


def _passkeys_offered() -> bool:
    return any(p.type == "webauthn" for p in providers().values())


def _leaves_a_method(
    user: ShownUser, accounts: Sequence[ShownAccount], passkeys: Sequence[ShownPasskey]
) -> bool:
    """Whether the user keeps a way to sign in after removing one of ``accounts`` or
    ``passkeys``: e-mail sign-in to the verified address, another linked provider, or
    another passkey (while passkeys are on). Without e-mail sign-in no row follows from
    the address, so every row counts."""
    if _email_signin(user) is not None:
        return True
    return len(accounts) + (len(passkeys) if _passkeys_offered() else 0) > 1


#: What the account page reads, each one statement on the driver outside a transaction
#: (``HotSelect``), all in one round trip with recent activity's (``read_together``):
#: only the columns it shows, as rows, where ORM objects and the request's BEGIN/COMMIT
#: cost more than the queries.
#: The user with what two-step verification they have (``second_factor.STATUS_COLUMNS``).
_PAGE_USER = HotSelect(
    select(
        User.id,
        User.name,
        User.email,
        User.email_verified,
        User.image,
        User.created_at,
        *second_factor.STATUS_COLUMNS,
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
        reads.append(audit.latest_for_user(user_id, activity + 1))
    users, accounts, passkeys, rows, *events = read_together(*reads)
    if not users:
        raise AccountError(NOT_FOUND, gettext("This account no longer exists."))
    user = users[0]
    linked = {a.provider for a in accounts}
    return Overview(
        user=user,
        accounts=[_method(a, user) for a in accounts],
        email_signin=_email_signin(user),
        # Removing a provider or a passkey: either leaves another way in, or neither.
        can_unlink=_leaves_a_method(user, accounts, passkeys),
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
        recently_signed_in=reauth.is_recent(session),
        reauth_minutes=reauth.window_minutes(),
        passkeys=[_passkey_info(p) for p in passkeys],
        passkeys_offered=_passkeys_offered(),
        passkey_problem=unavailable_reason(),
        two_factor=second_factor.Status.of(user),
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
    return _activity(audit.for_user(user_id, before=before, limit=limit + 1), limit)


def _activity(rows: Sequence[Any], limit: int) -> Activity:
    """The first ``limit`` of ``rows`` (events as ``audit.for_user`` reads them, one more
    than asked for) as entries, and where the next page starts if there was one more."""
    entries = [
        ActivityEntry(
            id=row.id,
            occurred_at=row.occurred_at,
            type=row.type,
            failed=row.outcome == audit.FAILURE,
            error_code=row.error_code,
            provider=provider_name(row.provider) if row.provider else None,
            device=row.device,
            ip=row.ip,
            detail=dict(row.detail or {}),
        )
        for row in rows[:limit]
    ]
    return Activity(entries, entries[-1].id if len(rows) > limit else None)


@dataclass(frozen=True)
class ConfirmMethod:
    """One way the user can confirm it is them: a sign-in with a method they already have."""

    kind: str
    provider_id: str
    name: str
    #: Pre-filled identifier: the address for e-mail, the account's subject for credentials.
    hint: str | None = None
    #: The credentials form's fields (name, label, type), for ``kind == "credentials"``.
    fields: tuple[tuple[str, str, str], ...] = ()


def confirmation_methods(*, user_id: int) -> list[ConfirmMethod]:
    """Return the sign-ins that confirm this user: their linked providers and, for a
    verified address, an e-mail link or code (an unverified one proves nothing)."""
    user = db.session.get(User, user_id)
    if user is None:
        raise AccountError(NOT_FOUND, gettext("This account no longer exists."))
    configured = providers()
    methods = []
    for account in _accounts(user_id):
        provider = configured.get(account.provider)
        if provider is None:
            continue
        if provider.type in LINKABLE_TYPES:
            methods.append(ConfirmMethod("oauth", provider.id, provider.name))
        elif provider.type == "credentials":
            fields = tuple((f.name, f.shown_label, f.type) for f in getattr(provider, "fields", ()))
            methods.append(
                ConfirmMethod(
                    "credentials", provider.id, provider.name, account.provider_account_id, fields
                )
            )
    email = _email_signin(user)
    if email is not None:
        methods.append(
            ConfirmMethod("email", email.provider_id, email.provider_name, email.address)
        )
    return methods


def link_option(*, user_id: int, provider_id: str) -> LinkOption | None:
    """Return ``provider_id`` as a provider the user can link now, or None."""
    provider = providers().get(provider_id)
    if provider is None or provider.type not in LINKABLE_TYPES:
        return None
    if any(a.provider == provider_id for a in _accounts(user_id)):
        return None
    return LinkOption(provider.id, provider.name)


def unlink_account(*, user_id: int, account_id: int, current: AuthSession) -> SignInMethod:
    """Remove one of the user's sign-in methods; refuse to remove the last one, and the
    e-mail row of the verified address (removing it would not stop e-mail sign-in).

    Needs a recent sign-in (``reauth``): with an old stolen cookie, removing the owner's
    methods would lock her out for good. The account's tokens are revoked at the provider
    first (a failure there does not stop the unlink).
    """
    require_recent(current)
    user = _locked_user(user_id)
    accounts = _accounts(user_id)
    account = next((a for a in accounts if a.id == account_id), None)
    if user is None or account is None:
        raise AccountError(NOT_FOUND, gettext("That sign-in method is not linked to your account."))
    if _follows_address(account, user):
        raise AccountError(
            EMAIL_KEPT,
            gettext(
                "E-mail sign-in comes with your verified address (%(address)s), so it cannot "
                "be removed. Two-step verification makes a link alone not enough.",
                address=user.email,
            ),
        )
    if not _leaves_a_method(user, accounts, _passkeys(user_id)):
        raise AccountError(
            LAST_METHOD,
            gettext(
                "%(provider)s is your only way to sign in, so it cannot be removed. Link "
                "another provider first.",
                provider=provider_name(account.provider),
            ),
        )
    revoke_tokens(account, forget=False)
    db.session.delete(account)
    audit.record(
        audit.Event.ACCOUNT_UNLINKED,
        user_id=user_id,
        provider=account.provider,
        detail={"account": account.id, "type": account.type},
    )
    notices.method_changed(user_id, provider=account.provider, added=False)
    return _method(account, user)


def rename_passkey(*, user_id: int, passkey_id: int, name: str) -> PasskeyInfo:
    """Give one of the user's passkeys a new name (1 to 64 characters, trimmed)."""
    chosen = clean_name(name)
    if chosen is None:
        raise AccountError("InvalidName")
    passkey = _passkey(user_id, passkey_id)
    passkey.name = chosen
    return _passkey_info(passkey)


def remove_passkey(*, user_id: int, passkey_id: int, current: AuthSession) -> PasskeyInfo:
    """Remove one of the user's passkeys; refuse to remove the last way to sign in.

    Needs a recent sign-in, as unlinking a provider does: an old stolen cookie must not
    remove the owner's ways in.
    """
    require_recent(current)
    user = _locked_user(user_id)
    if user is None:
        raise AccountError(NOT_FOUND, gettext("This account no longer exists."))
    passkey = _passkey(user_id, passkey_id)
    if _passkeys_offered() and not _leaves_a_method(user, _accounts(user_id), _passkeys(user_id)):
        raise AccountError(
            LAST_METHOD,
            gettext(
                "“%(name)s” is your only way to sign in, so it cannot be removed. Add another "
                "passkey or link a provider first.",
                name=passkey.name,
            ),
        )
    db.session.delete(passkey)
    audit.record(
        audit.Event.PASSKEY_REMOVED,
        user_id=user_id,
        provider=PASSKEY_PROVIDER,
        detail={"passkey": passkey.id, "name": passkey.name},
    )
    notices.method_changed(user_id, added=False)
    return _passkey_info(passkey)


def _passkey(user_id: int, passkey_id: int) -> Authenticator:
    passkey = db.session.get(Authenticator, passkey_id)
    if passkey is None or passkey.user_id != user_id:
        raise AccountError(
            NOT_FOUND, gettext("That passkey is not (or no longer) part of your account.")
        )
    return passkey


def end_session(*, user_id: int, session_id: int, current: AuthSession) -> bool:
    """Sign out one of the user's sessions; return whether it was this browser's own."""
    if session_id == current.id:
        end_current_session()
        audit.record(
            audit.Event.SIGNOUT,
            user_id=user_id,
            provider=current.provider,
            detail={"session": current.id},
        )
        return True
    deleted = execute_counting(
        delete(Session).where(Session.id == session_id, Session.user_id == user_id)
    )
    if not deleted:
        raise AccountError(NOT_FOUND, gettext("That session has already ended."))
    audit.record(
        audit.Event.SESSION_REVOKED,
        user_id=user_id,
        detail={"reason": audit.BY_USER, "session": session_id},
    )
    return False


def end_other_sessions(*, user_id: int, current: AuthSession) -> int:
    """Sign out every session of the user except this browser's; return how many ended.

    Needs a recent sign-in: a thief's old cookie must not sign the owner out everywhere.
    """
    require_recent(current)
    ended = execute_counting(
        delete(Session).where(Session.user_id == user_id, Session.id != current.id)
    )
    if ended:
        audit.record(
            audit.Event.SESSION_REVOKED,
            user_id=user_id,
            detail={"reason": audit.OTHERS, "sessions": ended},
        )
        notices.others_signed_out(user_id, count=ended)
    return ended


def delete_account(*, user_id: int, current: AuthSession, confirmation: str) -> None:
    """Delete the user with their accounts, sessions and pending e-mail links.

    Needs the typed confirmation and a sign-in within the re-authentication window, so an
    unattended browser or a stolen old cookie cannot delete the account. Every account's
    tokens are revoked at its provider first (failures there do not stop the deletion).
    """
    if confirmation.strip() != DELETE_CONFIRMATION:
        raise AccountError(
            NOT_CONFIRMED, gettext("Type %(word)s to confirm.", word=DELETE_CONFIRMATION)
        )
    require_recent(current)
    user = db.session.get(User, user_id)
    if user is None:
        raise AccountError(NOT_FOUND, gettext("This account no longer exists."))
    for account in _accounts(user_id):
        revoke_tokens(account, forget=False)
    notices.account_deleted(user)
    this_one = end_current_session()
    # Explicit deletes rather than relying on ON DELETE CASCADE: the outcome must not
    # depend on a connection's foreign-key setting (SQLite's is per connection).
    sessions = execute_counting(delete(Session).where(Session.user_id == user_id))
    db.session.execute(delete(Account).where(Account.user_id == user_id))
    for factor in (Authenticator, TotpAuthenticator, RecoveryCode):
        db.session.execute(delete(factor).where(factor.user_id == user_id))
    if user.email:
        db.session.execute(
            delete(VerificationToken).where(VerificationToken.identifier == user.email)
        )
    db.session.execute(delete(User).where(User.id == user_id))
    # The user's earlier events stay, naming nobody (ON DELETE SET NULL); this one names the
    # address it had, by its keyed hash, for an operator who is asked about it.
    audit.record(
        audit.Event.ACCOUNT_DELETED,
        subject=user.email,
        detail={"sessions": sessions + (this_one is not None)},
    )


def require_recent(current: AuthSession) -> None:
    """Refuse with ``REAUTH_REQUIRED`` unless the session proved itself recently."""
    if not reauth.is_recent(current):
        raise AccountError(
            REAUTH_REQUIRED,
            ngettext(
                "For your safety, this needs a sign-in in the last %(num)d minute. Confirm it "
                "is you, and you will be brought back here.",
                "For your safety, this needs a sign-in in the last %(num)d minutes. Confirm it "
                "is you, and you will be brought back here.",
                reauth.window_minutes(),
            ),
        )
