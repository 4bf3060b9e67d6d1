"""The provider this browser last signed in with: the sign-in chooser offers it first
("Continue with …, last used") and the error page names it.

Written by the server when a sign-in has worked (a session started), never when one is
only attempted: a declined or abandoned attempt must not become the hint. The value is a
provider id (nothing secret), read back only if it names a provider the pages offer.
"""

from __future__ import annotations

from flask import has_request_context, request

from webapp.browser_state import cookies
from webapp.settings import current_settings

COOKIE = "auth.last-provider"
#: Browsers cap cookie lifetimes at 400 days; each sign-in renews it.
MAX_AGE = 400 * 24 * 3600
#: Longer than any provider id worth reading back.
MAX_LENGTH = 128


def remember(provider_id: str) -> None:
    """Note that this browser has just signed in with ``provider_id`` (queues the cookie)."""
    if not has_request_context():
        return  # a sign-in from a terminal (``flask auth device-login``): no browser
    cookies.set_cookie(
        cookies.cookie_name(COOKIE),
        provider_id,
        max_age=MAX_AGE,
        path=current_settings().base_path or "/",
    )


def last_used() -> str | None:
    """The id of the provider this browser last signed in with, as the cookie holds it."""
    value = request.cookies.get(cookies.cookie_name(COOKIE))
    return value if value and len(value) <= MAX_LENGTH else None
