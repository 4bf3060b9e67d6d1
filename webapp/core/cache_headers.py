"""Which answers are personal, and so never cached (``ui.csp`` sends ``NO_STORE`` on them).

An answer made for a signed-in person, one that sets or clears the session cookie, every
answer under the auth path (tokens, sessions, forms with CSRF tokens; errors included) and
everything the account area answers are personal: neither a shared proxy nor the browser's
cache on a shared computer may keep a copy. The session code, the auth routes, the account
views and the error handlers mark the request; the security headers read the mark.
"""

from __future__ import annotations

from flask import g
from werkzeug.sansio.response import Response

#: The headers of a personal answer (``Pragma`` and ``Expires`` for HTTP/1.0 caches).
NO_STORE = [
    ("Cache-Control", "private, no-cache, no-store"),
    ("Pragma", "no-cache"),
    ("Expires", "0"),
]


def mark_personal() -> None:
    """Mark this request's answer as personal, never to be cached."""
    g.auth_personal = True


def answer_is_personal() -> bool:
    """Whether this request's answer was marked personal."""
    # One membership test, no more: the security headers ask this on every response.
    return "auth_personal" in g


def add_vary(response: Response, *headers: str) -> None:
    """Add ``headers`` to the answer's ``Vary`` (as ``response.vary.update`` would), keeping
    what it names already.

    Werkzeug's ``response.vary`` parses the header into a set and writes it back on every
    change; saving Flask's session did that twice, a fifth of the cost of ``GET
    /auth/csrf``'s cookie. This reads it as text, and writes it only to add something.
    """
    present = ", ".join(response.headers.getlist("Vary"))
    named = {name.strip().lower() for name in present.split(",")}
    if "*" in named:
        return
    missing = [name for name in headers if name.lower() not in named]
    if missing:
        response.headers["Vary"] = ", ".join([present, *missing] if present else missing)
