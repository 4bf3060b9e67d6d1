"""Cookies: their names and attributes, and a per-request jar flows write to.

Flows never touch the response; they queue cookie changes here and ``apply_cookies`` (an
``after_request`` handler) writes them. Every cookie is HttpOnly and SameSite=Lax; on an
HTTPS AUTH_URL it is also Secure and carries the ``__Secure-`` prefix (``__Host-`` for
cookies that need no path), so a sibling subdomain over plain HTTP cannot plant or
overwrite it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask import Response, g

from webapp.settings import current_settings

SESSION_COOKIE = "auth.session-token"
CSRF_COOKIE = "auth.csrf-token"


def cookie_name(base: str, *, host_only: bool = False, https: bool | None = None) -> str:
    """Return the cookie name to use for ``base`` under the AUTH_URL's scheme."""
    if not (current_settings().is_https if https is None else https):
        return base
    return ("__Host-" if host_only else "__Secure-") + base


def session_cookie_name() -> str:
    return cookie_name(SESSION_COOKIE)


@dataclass(frozen=True)
class _Pending:
    name: str
    value: str
    expires: datetime | None
    max_age: int | None
    path: str
    same_site: str


def _jar() -> dict[str, _Pending]:
    if "auth_cookie_jar" not in g:
        g.auth_cookie_jar = {}
    jar: dict[str, _Pending] = g.auth_cookie_jar
    return jar


def set_cookie(
    name: str,
    value: str,
    *,
    expires: datetime | None = None,
    max_age: int | None = None,
    path: str = "/",
    same_site: str = "Lax",
) -> None:
    """Queue ``name=value`` on the response; a later call for the same name wins.

    ``same_site="None"`` is only for cookies that must come back on a cross-site POST
    (an identity provider's form_post); such a cookie is always marked Secure, which
    browsers require and also honour on http://localhost.
    """
    _jar()[name] = _Pending(name, value, expires, max_age, path, same_site)


def pending(name: str) -> str | None:
    """The value queued for ``name`` in this request (None: nothing, or its removal)."""
    queued = _jar().get(name)
    return queued.value if queued is not None and queued.max_age != 0 else None


def clear_cookie(name: str, *, path: str = "/", same_site: str = "Lax") -> None:
    """Queue the removal of ``name``."""
    _jar()[name] = _Pending(name, "", datetime(1970, 1, 1), 0, path, same_site)


def apply_cookies(response: Response) -> Response:
    """Write the queued cookies to ``response`` (registered as an after_request handler)."""
    jar: dict[str, _Pending] | None = g.get("auth_cookie_jar")
    if not jar:
        return response
    secure = current_settings().is_https
    for c in jar.values():
        response.set_cookie(
            c.name,
            c.value,
            expires=c.expires,
            max_age=c.max_age,
            path=c.path,
            secure=secure or c.same_site == "None",
            httponly=True,
            samesite=c.same_site,
        )
    jar.clear()
    return response
