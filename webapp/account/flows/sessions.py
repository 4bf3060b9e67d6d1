"""Signing out from the account page: one of the user's sessions (this browser's too), or
every other one.
"""

from __future__ import annotations

from sqlalchemy import delete

from webapp.account.flows.recent_signin import require_recent
from webapp.account.flows.ways_in import NOT_FOUND
from webapp.auth import audit, notices
from webapp.auth.errors import AccountError
from webapp.auth.sessions import AuthSession, end_current_session
from webapp.database import execute_counting
from webapp.i18n import gettext
from webapp.models import Session


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
