"""Signing out: end this browser's session and say where to go."""

from __future__ import annotations

from sqlalchemy import select

from webapp import transactions
from webapp.auth.flows.provider_tokens import revoke_tokens
from webapp.auth.hooks import signed_out
from webapp.auth.providers import oauth_client
from webapp.auth.redirects import resolve_redirect
from webapp.auth.sessions import EndedSession, end_current_session
from webapp.extensions import db
from webapp.models import Account


def sign_out(*, callback_url: str | None) -> str:
    """Delete this browser's session (if any), clear its cookie; return the safe redirect.

    A session made through a provider with ``revoke_on_signout`` also revokes (and forgets)
    that account's tokens. ``signed_out`` is sent once the deletion is committed.
    """
    ended = end_current_session()
    if ended is not None:
        _revoke_if_asked(ended)
        transactions.on_commit(lambda: signed_out.send(user_id=ended.user_id, session_id=ended.id))
    return resolve_redirect(callback_url)


def _revoke_if_asked(ended: EndedSession) -> None:
    client = oauth_client(ended.provider) if ended.provider else None
    if client is None or not client.config.revoke_on_signout:
        return
    account = db.session.execute(
        select(Account).where(Account.user_id == ended.user_id, Account.provider == ended.provider)
    ).scalar_one_or_none()
    if account is not None:
        revoke_tokens(account, forget=True)
