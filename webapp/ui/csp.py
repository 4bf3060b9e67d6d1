"""Security headers on every response: the Content-Security-Policy, HSTS and no-store.

Scripts and styles come only from this origin: no inline script or style, no eval (htmx is
configured without its eval features and indicator styles; the brand colour is a
stylesheet). ``form-action`` is deliberately absent: Chromium applies it to the redirects
after a form post, and ``POST signin/<id>`` redirects to each identity provider's origin.
Images may also come from https (profile pictures at the identity providers).

A personal answer (``caching.answer_is_personal``: made for a signed-in person, setting or
clearing the session cookie, under the auth path or the account area) gets
``Cache-Control: private, no-cache, no-store``: neither a shared proxy nor the browser's
cache (the back button on a shared computer) may keep a copy. Static files read no session,
so they keep their cache headers. On an https AUTH_URL every answer carries HSTS
(``AUTH_HSTS_MAX_AGE``), so the browser never tries plain http first, where the first
request could be intercepted.

In an application that adds the facility, these headers are for our answers only (``ours``):
the application's own pages keep the headers it gives them, and get no-store when they are
personal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from flask import Flask, Response
from werkzeug.wrappers import Response as BaseResponse

from webapp.core.cache_headers import NO_STORE, answer_is_personal
from webapp.settings import Settings

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: https:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)

HEADERS = [
    ("Content-Security-Policy", POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "strict-origin-when-cross-origin"),
]
#: The same, for answers at a URL that carries a secret: no Referer at all.
NO_REFERRER_HEADERS = [*HEADERS[:2], ("Referrer-Policy", "no-referrer")]


def strict_transport_security(conf: Settings) -> str | None:
    """Return the ``Strict-Transport-Security`` value, or None when it is not to be sent.

    Only on an https AUTH_URL (browsers ignore it over http anyway) and a non-zero max-age.
    """
    if not conf.is_https or conf.hsts_max_age == 0:
        return None
    value = f"max-age={conf.hsts_max_age}"
    return value + "; includeSubDomains" if conf.hsts_include_subdomains else value


_R = TypeVar("_R", bound=BaseResponse)


def without_referrer(response: _R) -> _R:
    """Give ``response`` the fixed security headers with ``Referrer-Policy: no-referrer``.

    It then has a Content-Security-Policy of its own, so ``add_headers`` leaves the fixed
    three alone (rather than adding a second, weaker Referrer-Policy).
    """
    for name, value in NO_REFERRER_HEADERS:
        response.headers[name] = value
    return response


def init_app(app: Flask, conf: Settings, *, ours: Callable[[], bool] | None = None) -> None:
    """Add the headers to every response of ``app`` (with ``ours``, to the responses it
    says are ours); HSTS is prepared here, once."""
    hsts = strict_transport_security(conf)
    headers = HEADERS + [("Strict-Transport-Security", hsts)] if hsts else HEADERS
    personal_headers = headers + NO_STORE

    def add_headers(response: Response) -> Response:
        # This runs on every response: werkzeug checks every header it is given, so the
        # usual answer gets all of its fixed headers in one extend, after one pass over the
        # names it has (werkzeug's ``in`` builds and catches an HTTP error for each name it
        # misses); the personal-answer test is one look into ``g``. A view that sets its
        # own Content-Security-Policy takes charge of the fixed three.
        fields = response.headers
        personal = answer_is_personal()
        if ours is not None and not ours():
            if personal and "no-store" not in fields.get("Cache-Control", ""):
                fields.update(NO_STORE)
            return response
        names = {name.lower() for name, _value in fields}
        if "content-security-policy" not in names:
            if personal and "cache-control" not in names:
                fields.extend(personal_headers)
                return response
            fields.extend(headers)
        elif hsts and "strict-transport-security" not in names:
            fields["Strict-Transport-Security"] = hsts
        if personal and "no-store" not in fields.get("Cache-Control", ""):
            fields.update(NO_STORE)
        return response

    app.after_request(add_headers)
