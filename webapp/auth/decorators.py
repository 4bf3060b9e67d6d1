"""View decorators for the application's own views.

``recent_signin_required`` asks of a view what the account area asks before a sensitive
change: a sign-in, or a later confirmation, within AUTH_REAUTH_MAX_AGE (or the view's own
``max_age``). Flask-Login's ``fresh_login_required`` means the same with the setting's
window (``webapp.web.extensions``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, TypeVar, cast, overload

from flask import current_app, request
from flask_login import current_user
from flask_login.config import EXEMPT_METHODS

from webapp.sessions import reauthentication
from webapp.sessions.store import current_session
from webapp.web.error_answers import recent_signin_needed
from webapp.web.extensions import login_manager

F = TypeVar("F", bound=Callable[..., Any])


@overload
def recent_signin_required(view: F, /) -> F: ...
@overload
def recent_signin_required(*, max_age: timedelta | float | None = None) -> Callable[[F], F]: ...
def recent_signin_required(
    view: F | None = None, /, *, max_age: timedelta | float | None = None
) -> F | Callable[[F], F]:
    """Let a view run only for a session whose sign-in (or later confirmation) is recent.

    ``@recent_signin_required``, or ``@recent_signin_required(max_age=300)`` for another
    window than AUTH_REAUTH_MAX_AGE (a ``timedelta`` or seconds). Signed out: as
    ``login_required``, to the sign-in page. Signed in but not recently: to the confirmation
    page, which brings the person back to this view's URL; a script (and a bearer token's
    caller, who has no session to confirm) gets 403 ``RecentSignInRequired`` with
    ``confirmUrl``. As Flask-Login's decorators, it lets OPTIONS through, and every request
    when ``LOGIN_DISABLED`` is set.
    """
    window = _window(max_age)

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if request.method in EXEMPT_METHODS or current_app.config.get("LOGIN_DISABLED"):
                pass
            elif not current_user.is_authenticated:
                return login_manager.unauthorized()
            else:
                session = current_session()
                if session is None or not reauthentication.is_recent(session, window):
                    return recent_signin_needed()
            return current_app.ensure_sync(view)(*args, **kwargs)

        return cast(F, wrapper)

    return decorate if view is None else decorate(view)


def _window(max_age: timedelta | float | None) -> timedelta | None:
    """``max_age`` as a window (None: the setting's), refused when it is not positive."""
    if max_age is None:
        return None
    window = max_age if isinstance(max_age, timedelta) else timedelta(seconds=max_age)
    if window <= timedelta(0):
        raise ValueError(f"max_age must be more than zero; got {max_age!r}")
    return window
