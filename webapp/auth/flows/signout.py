"""Signing out: end this browser's session and say where to go."""

from __future__ import annotations

from webapp import transactions
from webapp.auth.hooks import signed_out
from webapp.auth.redirects import resolve_redirect
from webapp.auth.sessions import end_current_session


def sign_out(*, callback_url: str | None) -> str:
    """Delete this browser's session (if any), clear its cookie; return the safe redirect.

    ``signed_out`` is sent once the deletion is committed.
    """
    ended = end_current_session()
    if ended is not None:
        transactions.on_commit(lambda: signed_out.send(user_id=ended.user_id, session_id=ended.id))
    return resolve_redirect(callback_url)
