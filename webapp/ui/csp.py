"""Security headers on every response, chiefly a Content-Security-Policy.

Scripts and styles come only from this origin: no inline script or style, no eval (htmx is
configured without its eval features and indicator styles; the brand colour is a
stylesheet). ``form-action`` is deliberately absent: Chromium applies it to the redirects
after a form post, and ``POST signin/<id>`` redirects to each identity provider's origin.
Images may also come from https (profile pictures at the identity providers).
"""

from __future__ import annotations

from flask import Flask, Response

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


def _add_headers(response: Response) -> Response:
    # One check and one extend (not a setdefault each): this runs on every response.
    # A view that sets its own Content-Security-Policy takes charge of all three.
    if "Content-Security-Policy" not in response.headers:
        response.headers.extend(HEADERS)
    return response


def init_app(app: Flask) -> None:
    app.after_request(_add_headers)
