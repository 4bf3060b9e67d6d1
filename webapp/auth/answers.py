"""How the auth routes answer a flow's outcome: a redirect, or ``{"url": …}`` for scripts.

Auth.js clients ask for JSON (``json=true`` in the form, ``X-Auth-Return-Redirect``, or a
JSON body) and then read ``url`` from every answer, errors included.
"""

from __future__ import annotations

from flask import jsonify, redirect, request
from werkzeug.wrappers import Response


def wants_json() -> bool:
    """Whether the client asked for ``{"url": …}`` instead of a redirect (Auth.js style)."""
    if request.headers.get("X-Auth-Return-Redirect") or request.form.get("json") == "true":
        return True
    return request.is_json


def send_to(url: str) -> Response:
    """Send the browser to ``url``: a 302, or ``{"url": url}`` when JSON was asked for."""
    if wants_json():
        return jsonify({"url": url})
    return redirect(url, code=302)


def callback_url_param() -> str | None:
    """The request's ``callbackUrl`` (form or query), unchecked; empty is None."""
    value = request.values.get("callbackUrl")
    return value if value else None
