"""Recent sign-in: changing how someone signs in, or deleting them, needs one.

A stolen or forgotten session cookie must not be enough to link the thief's own provider
identity, remove the owner's methods (locking her out for good) or delete the account.
Those actions need a session created within ``AUTH_REAUTH_MAX_AGE`` (default 10 minutes);
otherwise the person confirms it is them by signing in again with a method already linked
(``/account/confirm``), which creates a fresh session and brings them back to the action.
"""

from __future__ import annotations

from urllib.parse import urlencode

from sqlalchemy import select

from webapp.auth.sessions import AuthSession
from webapp.clock import utcnow
from webapp.extensions import db
from webapp.models import Account
from webapp.settings import current_settings

#: The page that asks for the fresh sign-in (webapp/account/views.py).
CONFIRM_PATH = "/account/confirm"


def is_recent(session: AuthSession) -> bool:
    """Whether the person proved who they are in ``session`` within the window (its sign-in,
    or a later confirmation with a second factor)."""
    return utcnow() - session.authenticated_at <= current_settings().account_reauth_window


def window_minutes() -> int:
    """The re-authentication window in whole minutes, for the pages' explanations."""
    return max(1, int(current_settings().account_reauth_window.total_seconds() // 60))


def confirm_url(next_path: str) -> str:
    """Return the confirmation page's path, which leads back to ``next_path`` afterwards."""
    return f"{CONFIRM_PATH}?{urlencode({'next': next_path})}"


def has_method(session: AuthSession, provider: str) -> bool:
    """Whether the session's user has an account at ``provider`` (a way to confirm)."""
    return (
        db.session.execute(
            select(Account.id).where(
                Account.user_id == session.user.id, Account.provider == provider
            )
        ).first()
        is not None
    )


def link_needs_confirmation(session: AuthSession | None, provider: str, subject: str) -> bool:
    """Whether signing in as (provider, subject) now would link a new method to an old
    session's user. A method the user already has is how they confirm; one that belongs
    to someone else is refused by the linking rules (OAuthAccountNotLinked) anyway."""
    if session is None or is_recent(session):
        return False
    owner = db.session.execute(
        select(Account.user_id).where(
            Account.provider == provider, Account.provider_account_id == subject
        )
    ).scalar_one_or_none()
    return owner is None
