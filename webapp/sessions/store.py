"""Database sessions: create, read (the hot path), extend, and end them.

The cookie carries 32 random bytes (base64url); the row keeps only their SHA-256, so a
copy of the table cannot be replayed as a cookie. SHA-256 without a key is enough here:
the input is 256 random bits, so there is nothing to guess. Reading a session is one SQL
statement (session joined with user) outside any transaction, so no BEGIN/ROLLBACK round
trips either, run on PostgreSQL straight on the driver (``database.HotSelect``). A write
happens only when the session is expired (DELETE) or was last recorded active more than the
update age ago (one UPDATE; the cookie is sent again when its expiry moved).

Two limits bound what a stolen cookie is worth: a session ends ``session_max_age_absolute``
after its sign-in however often it is used (``expires`` never passes that point), and a
user holds at most ``max_sessions_per_user`` live sessions (a sign-in ends the least
recently used beyond it).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from flask import g, request
from flask_login import UserMixin
from sqlalchemy import bindparam, delete, insert, or_, select, update

from webapp.audit import trail
from webapp.browser_state import cookies
from webapp.core.cache_headers import mark_personal
from webapp.core.clock import iso_utc, utcnow
from webapp.metrics import events as metrics_events
from webapp.settings import current_settings
from webapp.storage.database import HotSelect, delete_in_batches, execute_counting, write_now
from webapp.storage.db import db
from webapp.storage.models import Session, User

TOKEN_BYTES = 32


@dataclass(frozen=True)
class AuthUser(UserMixin):
    """The signed-in user as the session read sees it; Flask-Login's ``current_user``."""

    id: int
    name: str | None
    email: str | None
    image: str | None

    def get_id(self) -> str:
        return str(self.id)


@dataclass(frozen=True)
class AuthSession:
    """A valid session, after any extension this read made."""

    id: int
    user: AuthUser
    expires: datetime
    created_at: datetime
    provider: str | None
    #: When the person last proved who they are in this session (sign-in or step-up).
    authenticated_at: datetime


def new_token() -> str:
    """Return a fresh session token: 32 random bytes, base64url without padding."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """Return the hex SHA-256 of a token, the only form the database holds."""
    return hashlib.sha256(token.encode()).hexdigest()


_READ = HotSelect(
    select(
        Session.id,
        Session.expires,
        Session.created_at,
        Session.last_active_at,
        Session.provider,
        Session.authenticated_at,
        User.id.label("user_id"),
        User.name,
        User.email,
        User.image,
    )
    .join(User, User.id == Session.user_id)
    .where(Session.token_hash == bindparam("token_hash"))
)


def read_session(token: str) -> tuple[AuthSession | None, bool]:
    """Look a token up; return the session (or None) and whether this read moved its expiry.

    A row past ``expires`` or past ``created_at + session_max_age_absolute`` is deleted.
    A valid one last recorded active ``update_age`` ago or more gets ``last_active_at =
    now`` and ``expires = min(now + max_age, created_at + absolute)`` in one UPDATE;
    otherwise nothing is written.
    """
    if not token or len(token) > 256:
        return None, False
    conf = current_settings()
    row = _READ.first({"token_hash": hash_token(token)})
    if row is None:
        return None, False
    now = utcnow()
    # Checked here too, not only through expires: rows written before the setting was
    # lowered may carry an expiry beyond the new absolute end.
    end = row.created_at + conf.session_max_age_absolute
    if row.expires <= now or end <= now:
        write_now(delete(Session).where(Session.id == row.id))
        metrics_events.session_expired()
        return None, False
    expires = row.expires
    extended = False
    # Due by last_active_at rather than by expires: near the absolute end expires stops
    # moving, and activity must still be recorded (the cap ends the least recently used),
    # at most once per update age.
    if row.last_active_at + conf.session_update_age <= now:
        new_expires = min(now + conf.session_max_age, end)
        extended = new_expires != expires
        expires = new_expires
        moved = (
            update(Session).where(Session.id == row.id).values(expires=expires, last_active_at=now)
        )
        if extended:
            # The once-a-day extension and its record, in one transaction of their own.
            record = trail.event_row(
                trail.Event.SESSION_EXTENDED,
                user_id=row.user_id,
                provider=row.provider,
                detail={"session": row.id},
            )
            write_now(moved, record.insert)
            record.announce()
        else:
            write_now(moved)
    user = AuthUser(id=row.user_id, name=row.name, email=row.email, image=row.image)
    session = AuthSession(
        row.id,
        user,
        expires,
        row.created_at,
        row.provider,
        # Rows from before migration 0006 have none: they proved it at their sign-in.
        row.authenticated_at or row.created_at,
    )
    return session, extended


def current_session() -> AuthSession | None:
    """Return the session of this request's cookie, read at most once per request.

    Clears the cookie when it names no valid session, and re-sends it when the read
    moved the session's expiry.
    """
    if "auth_session" in g:
        cached: AuthSession | None = g.auth_session
        return cached
    token = request.cookies.get(cookies.session_cookie_name())
    session: AuthSession | None = None
    if token:
        # Either way the answer is personal: made for a signed-in person, or clearing the
        # cookie of a dead session.
        mark_personal()
        session, extended = read_session(token)
        if session is None:
            _queue_cookie(None)
        elif extended:
            _queue_cookie(token, session.expires)
    g.auth_session = session
    return session


def _queue_cookie(token: str | None, expires: datetime | None = None) -> None:
    """Queue the session cookie (``None``: its removal) and mark the answer personal."""
    name = cookies.session_cookie_name()
    if token is None:
        cookies.clear_cookie(name)
    else:
        cookies.set_cookie(name, token, expires=expires)
    mark_personal()


def treat_as_signed_out() -> None:
    """Answer the rest of this request as signed out, without reading the session again
    (an error page rendered while the database is unreachable)."""
    g.auth_session = None


@dataclass(frozen=True)
class ProviderSession:
    """What a session remembers of the identity provider's session (OpenID Connect), so
    that signing out here can end it there and its logout can end ours."""

    #: The ID token's ``sid``: the provider's session, named in back-channel logout.
    sid: str | None
    #: The ID token's ``sub``: the person at the provider, named in back-channel logout.
    sub: str | None
    #: The ID token itself, sent back as ``id_token_hint`` (stored sealed).
    id_token: str | None


def create_session(
    user_id: int,
    *,
    provider: str | None,
    amr: Sequence[str],
    provider_session: ProviderSession | None = None,
) -> AuthSession:
    """Create a session row for ``user_id`` and queue its cookie (committed with the request).

    ``amr`` says how the person proved who they are (``flows.finish``); the session counts
    as authenticated now.

    The user's live sessions beyond ``max_sessions_per_user`` are ended (see
    ``_end_least_recently_used``), in the caller's transaction.
    """
    conf = current_settings()
    token = new_token()
    now = utcnow()
    expires = now + min(conf.session_max_age, conf.session_max_age_absolute)
    user_agent = request.headers.get("User-Agent", "")[: conf.user_agent_max_length] or None
    session_id = db.session.execute(
        insert(Session)
        .values(
            user_id=user_id,
            token_hash=hash_token(token),
            expires=expires,
            created_at=now,
            last_active_at=now,
            authenticated_at=now,
            amr=" ".join(amr),
            ip=request.remote_addr,
            user_agent=user_agent,
            provider=provider,
            provider_sid=provider_session.sid if provider_session else None,
            provider_sub=provider_session.sub if provider_session else None,
            id_token=provider_session.id_token if provider_session else None,
        )
        .returning(Session.id)
    ).scalar_one()
    _end_least_recently_used(user_id, keep=session_id, limit=conf.max_sessions_per_user, now=now)
    user = db.session.get(User, user_id)
    assert user is not None
    _queue_cookie(token, expires)
    session = AuthSession(
        session_id,
        AuthUser(id=user.id, name=user.name, email=user.email, image=user.image),
        expires,
        now,
        provider,
        now,
    )
    g.auth_session = session
    return session


def record_authentication(session: AuthSession, amr: Sequence[str]) -> None:
    """Record that the person just proved who they are again in ``session`` (a step-up),
    in the caller's transaction."""
    now = utcnow()
    db.session.execute(
        update(Session)
        .where(Session.id == session.id)
        .values(authenticated_at=now, amr=" ".join(amr))
    )
    g.auth_session = replace(session, authenticated_at=now)


def _end_least_recently_used(user_id: int, *, keep: int, limit: int, now: datetime) -> None:
    """Delete the user's sessions beyond the ``limit`` most recently used, in one statement.

    ``keep`` (the session just created) always stays, with the ``limit - 1`` others of
    latest ``last_active_at`` (ties: the newer id); expired rows are ended sessions and go
    too. Deliberately without a lock: under PostgreSQL's READ COMMITTED the statement sees
    only committed rows, so concurrent sign-ins of one user each miss the other's new row
    and delete too little, never too much; the user briefly holds a session or two more
    than the limit, until the next sign-in. Locking the user row would make it exact at
    the price of serialising that user's sign-ins; ending a session the rule would keep
    is the worse error. (SQLite serialises writers: exact there.)
    """
    newest = (
        select(Session.id)
        .where(Session.user_id == user_id, Session.id != keep, Session.expires > now)
        .order_by(Session.last_active_at.desc(), Session.id.desc())
        .limit(limit - 1)
    )
    ended = execute_counting(
        delete(Session)
        .where(Session.user_id == user_id, Session.id != keep, Session.id.not_in(newest))
        # No ORM bookkeeping: nothing loaded is affected, and it would cost a statement.
        .execution_options(synchronize_session=False)
    )
    if ended:
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            detail={"reason": trail.LIMIT, "sessions": ended},
        )


@dataclass(frozen=True)
class EndedSession:
    id: int
    user_id: int
    #: The provider the session was signed in through (None: e-mail, credentials, unknown).
    provider: str | None = None
    #: The ID token of its sign-in (None: not an OpenID Connect sign-in, or not kept).
    id_token: str | None = None
    #: The provider's session and subject (``ProviderSession``), for a SAML single logout.
    provider_sid: str | None = None
    provider_sub: str | None = None


def end_current_session() -> EndedSession | None:
    """Delete this browser's session row (if any) in the caller's transaction; clear the cookie.

    Deletes by the cookie's hash in one statement, without reading the session first, so it
    joins the caller's transaction (a sign-in replacing the session) and takes no other
    connection.
    """
    token = request.cookies.get(cookies.session_cookie_name())
    ended = None
    if token and len(token) <= 256:
        row = db.session.execute(
            delete(Session)
            .where(Session.token_hash == hash_token(token))
            .returning(
                Session.id,
                Session.user_id,
                Session.provider,
                Session.id_token,
                Session.provider_sid,
                Session.provider_sub,
            )
        ).first()
        ended = EndedSession(*row) if row else None
    if token:
        _queue_cookie(None)
    g.auth_session = None
    return ended


def end_provider_sessions(provider: str, *, sid: str | None, sub: str | None) -> list[EndedSession]:
    """Delete the sessions an identity provider's logout names, in the caller's transaction.

    With ``sid``: the sessions of that provider session (and of ``sub``, when given and
    stored). With ``sub`` alone: every session signed in through ``provider`` as that
    subject. Sessions from before migration 0005 have no ``provider_sub``: only a ``sid``
    reaches them.
    """
    where = [Session.provider == provider]
    if sid is not None:
        where.append(Session.provider_sid == sid)
        if sub is not None:
            where.append(or_(Session.provider_sub == sub, Session.provider_sub.is_(None)))
    elif sub is not None:
        where.append(Session.provider_sub == sub)
    else:
        raise ValueError("a provider logout names a sid or a sub")
    rows = db.session.execute(
        delete(Session)
        .where(*where)
        .returning(Session.id, Session.user_id)
        .execution_options(synchronize_session=False)
    ).all()
    return [EndedSession(row.id, row.user_id, provider) for row in rows]


def delete_expired(*, batch_size: int = 5000) -> int:
    """Delete expired sessions in batches (short transactions, no long locks); return count.

    Each batch that deleted any is one ``session.revoked`` event (reason ``expired``) with
    its count, in its transaction. This also removes sessions past their absolute lifetime:
    ``expires`` is never set beyond ``created_at + session_max_age_absolute``, so they are
    expired rows. (Rows written before that setting was lowered wait for their own
    ``expires``, at most ``session_max_age`` later; the read refuses them meanwhile.)
    """

    def counted(deleted: int) -> None:
        if deleted:
            trail.record(
                trail.Event.SESSION_REVOKED, detail={"reason": trail.EXPIRED, "sessions": deleted}
            )

    return delete_in_batches(
        Session.id, Session.expires <= utcnow(), batch_size=batch_size, each_batch=counted
    )


def session_json(session: AuthSession) -> dict[str, object]:
    """Return the ``GET session`` body for a valid session (before the session hook)."""
    return {
        "user": {
            "name": session.user.name,
            "email": session.user.email,
            "image": session.user.image,
        },
        "expires": iso_utc(session.expires),
    }
