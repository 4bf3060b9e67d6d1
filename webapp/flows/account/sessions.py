"""Signing out from the account page: one of the user's sessions (this browser's too), or
every other one.
"""

from __future__ import annotations

from sqlalchemy import delete

from webapp.audit import trail
from webapp.errors import AccountError
from webapp.flows import notices
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import NOT_FOUND
from webapp.i18n import gettext
from webapp.sessions.store import AuthSession, end_current_session
from webapp.storage.database import execute_counting
from webapp.storage.models import Session


def end_session(*, user_id: int, session_id: int, current: AuthSession) -> bool:
    """Sign out one of the user's sessions; return whether it was this browser's own."""
    if session_id == current.id:
        end_current_session()
        trail.record(
            trail.Event.SIGNOUT,
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
    trail.record(
        trail.Event.SESSION_REVOKED,
        user_id=user_id,
        detail={"reason": trail.BY_USER, "session": session_id},
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
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            detail={"reason": trail.OTHERS, "sessions": ended},
        )
        notices.others_signed_out(user_id, count=ended)
    return ended
