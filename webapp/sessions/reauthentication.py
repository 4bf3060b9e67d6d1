"""Recent sign-in: changing how someone signs in, or deleting them, needs one.

A stolen or forgotten session cookie must not be enough to link the thief's own provider
identity, remove the owner's methods (locking her out for good) or delete the account.
Those actions need a session created within ``AUTH_REAUTH_MAX_AGE`` (default 10 minutes);
otherwise the person confirms it is them by signing in again with a method already linked
(``/account/confirm``), which creates a fresh session and brings them back to the action.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from webapp.core.clock import utcnow
from webapp.sessions.store import AuthSession
from webapp.settings import current_settings

#: The page that asks for the fresh sign-in (webapp/web/account_routes.py).
CONFIRM_PATH = "/account/confirm"


def is_recent(session: AuthSession, max_age: timedelta | None = None) -> bool:
    """Whether the person proved who they are in ``session`` (its sign-in, or a later
    confirmation with a second factor) within ``max_age``, by default AUTH_REAUTH_MAX_AGE."""
    window = current_settings().account_reauth_window if max_age is None else max_age
    return utcnow() - session.authenticated_at <= window


def window_minutes() -> int:
    """The re-authentication window in whole minutes, for the pages' explanations."""
    return max(1, int(current_settings().account_reauth_window.total_seconds() // 60))


def confirm_url(next_path: str) -> str:
    """Return the confirmation page's path, which leads back to ``next_path`` afterwards."""
    return f"{CONFIRM_PATH}?{urlencode({'next': next_path})}"
