"""Database sessions: create, read (the hot path), extend, and end them.

The cookie carries 32 random bytes (base64url); the row keeps only their SHA-256, so a
copy of the table cannot be replayed as a cookie. SHA-256 without a key is enough here:
the input is 256 random bits, so there is nothing to guess. Reading a session is one SQL
statement (session joined with user) outside any transaction, so no BEGIN/ROLLBACK round
trips either, run on PostgreSQL straight on the driver (``database.HotSelect``). A write
happens only when the session is expired (DELETE) or older than the update age (one
UPDATE, and only then is the cookie sent again).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from flask import g, request
from flask_login import UserMixin
from sqlalchemy import Executable, bindparam, delete, insert, select, update

from ..database import HotSelect, execute_counting
from ..extensions import db
from ..models import Session, User, utcnow
from . import cookies, urls

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
        Session.provider,
        User.id.label("user_id"),
        User.name,
        User.email,
        User.image,
    )
    .join(User, User.id == Session.user_id)
    .where(Session.token_hash == bindparam("token_hash"))
)


def read_session(token: str) -> tuple[AuthSession | None, bool]:
    """Look a token up; return the session (or None) and whether this read extended it.

    An expired row is deleted. A valid one whose ``expires - max_age + update_age`` has
    passed gets ``expires = now + max_age`` in one UPDATE; otherwise nothing is written.
    """
    if not token or len(token) > 256:
        return None, False
    conf = urls.settings()
    row = _READ.first({"token_hash": hash_token(token)})
    if row is None:
        return None, False
    now = utcnow()
    if row.expires <= now:
        _write_outside_transaction(delete(Session).where(Session.id == row.id))
        return None, False
    expires = row.expires
    extended = expires - conf.session_max_age + conf.session_update_age <= now
    if extended:
        expires = now + conf.session_max_age
        _write_outside_transaction(
            update(Session).where(Session.id == row.id).values(expires=expires, last_active_at=now)
        )
    user = AuthUser(id=row.user_id, name=row.name, email=row.email, image=row.image)
    session = AuthSession(row.id, user, expires, row.created_at, row.provider)
    return session, extended


def _write_outside_transaction(statement: Executable) -> None:
    # One statement on its own: the read's rare DELETE or UPDATE needs no BEGIN/COMMIT.
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(statement)


def current_session() -> AuthSession | None:
    """Return the session of this request's cookie, read at most once per request.

    Clears the cookie when it names no valid session, and re-sends it when the read
    extended the session.
    """
    if "auth_session" in g:
        cached: AuthSession | None = g.auth_session
        return cached
    name = cookies.session_cookie_name()
    token = request.cookies.get(name)
    session: AuthSession | None = None
    if token:
        session, extended = read_session(token)
        if session is None:
            cookies.clear_cookie(name)
        elif extended:
            cookies.set_cookie(name, token, expires=session.expires)
    g.auth_session = session
    return session


def create_session(
    user_id: int, *, provider: str | None, provider_sid: str | None = None
) -> AuthSession:
    """Create a session row for ``user_id`` and queue its cookie; commit is the caller's."""
    conf = urls.settings()
    token = new_token()
    now = utcnow()
    expires = now + conf.session_max_age
    user_agent = request.headers.get("User-Agent", "")[: conf.user_agent_max_length] or None
    session_id = db.session.execute(
        insert(Session)
        .values(
            user_id=user_id,
            token_hash=hash_token(token),
            expires=expires,
            created_at=now,
            last_active_at=now,
            ip=request.remote_addr,
            user_agent=user_agent,
            provider=provider,
            provider_sid=provider_sid,
        )
        .returning(Session.id)
    ).scalar_one()
    user = db.session.get(User, user_id)
    assert user is not None
    cookies.set_cookie(cookies.session_cookie_name(), token, expires=expires)
    session = AuthSession(
        session_id,
        AuthUser(id=user.id, name=user.name, email=user.email, image=user.image),
        expires,
        now,
        provider,
    )
    g.auth_session = session
    return session


@dataclass(frozen=True)
class EndedSession:
    id: int
    user_id: int


def end_current_session() -> EndedSession | None:
    """Delete this browser's session row (if any) in the caller's transaction; clear the cookie.

    Deletes by the cookie's hash in one statement, without reading the session first, so it
    joins the caller's transaction (a sign-in replacing the session) and takes no other
    connection.
    """
    name = cookies.session_cookie_name()
    token = request.cookies.get(name)
    ended = None
    if token and len(token) <= 256:
        row = db.session.execute(
            delete(Session)
            .where(Session.token_hash == hash_token(token))
            .returning(Session.id, Session.user_id)
        ).first()
        ended = EndedSession(row.id, row.user_id) if row else None
    if token:
        cookies.clear_cookie(name)
    g.auth_session = None
    return ended


def delete_expired(*, batch_size: int = 5000) -> int:
    """Delete expired sessions in batches (short transactions, no long locks); return count."""
    total = 0
    while True:
        ids = select(Session.id).where(Session.expires <= utcnow()).limit(batch_size)
        deleted = execute_counting(delete(Session).where(Session.id.in_(ids.scalar_subquery())))
        db.session.commit()
        total += deleted
        if deleted < batch_size:
            return total


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


def iso_utc(moment: datetime) -> str:
    """Format as ISO-8601 UTC with milliseconds and ``Z``, as JavaScript's toISOString."""
    # isoformat is four times faster than strftime, and this runs on every session read;
    # its first 23 characters are "YYYY-MM-DDTHH:MM:SS.mmm", the offset is cut off.
    return moment.isoformat(timespec="milliseconds")[:23] + "Z"
