"""Which answers are personal, and so never cached (``ui.csp`` sends ``NO_STORE`` on them).

An answer made for a signed-in person, one that sets or clears the session cookie, every
answer under the auth path (tokens, sessions, forms with CSRF tokens; errors included) and
everything the account area answers are personal: neither a shared proxy nor the browser's
cache on a shared computer may keep a copy. The session code, the auth routes, the account
views and the error handlers mark the request; the security headers read the mark.
"""

from __future__ import annotations

from flask import g

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
