"""Known browsers: a signed cookie naming whom this browser has signed in as.

Per-identifier throttles protect an account from guesses spread over many addresses, but
anyone can use them up and so lock the owner out. A browser that has signed in as that
identifier before carries this cookie and is counted on its own allowance instead
(docs/security.md, "Throttles"): an attacker cannot use it up without the cookie, and
cannot forge the cookie without AUTH_SECRET. The cookie holds a random browser id and
keyed hashes of the identifiers, never the identifiers themselves.
"""

from __future__ import annotations

import secrets

from flask import request
from itsdangerous import BadSignature, URLSafeSerializer

from webapp.browser_state import cookies
from webapp.settings import current_settings

COOKIE = "auth.known-browser"
#: Browsers cap cookie lifetimes at 400 days; each sign-in renews it.
MAX_AGE = 400 * 24 * 3600
#: Identifiers remembered per browser (a shared computer), newest first.
MAX_IDENTIFIERS = 10


def _serializer() -> URLSafeSerializer:
    # itsdangerous signs with the last key and accepts all: current secret last.
    keys = list(reversed(current_settings().derive_keys("known-browser")))
    return URLSafeSerializer(keys, salt="known-browser")


def _read() -> tuple[str | None, list[str]]:
    raw = request.cookies.get(cookies.cookie_name(COOKIE))
    if not raw or len(raw) > 4096:
        return None, []
    try:
        data = _serializer().loads(raw)
    except BadSignature:
        return None, []
    if not isinstance(data, dict) or not isinstance(data.get("b"), str):
        return None, []
    known = [h for h in data.get("i", []) if isinstance(h, str)]
    return data["b"], known


def browser_for(identifier_hash: str) -> str | None:
    """Return this browser's id if it has signed in as ``identifier_hash`` before."""
    browser, known = _read()
    return browser if browser and identifier_hash in known else None


def remember(identifier_hash: str) -> None:
    """Note that this browser signed in as ``identifier_hash`` (queues the cookie)."""
    browser, known = _read()
    known = [identifier_hash, *(h for h in known if h != identifier_hash)][:MAX_IDENTIFIERS]
    value = _serializer().dumps({"b": browser or secrets.token_urlsafe(16), "i": known})
    cookies.set_cookie(
        cookies.cookie_name(COOKIE),
        value,
        max_age=MAX_AGE,
        path=current_settings().base_path or "/",
    )
