"""How the auth routes answer a flow's outcome: a redirect, or ``{"url": …}`` for scripts.

Auth.js clients ask for JSON (``json=true`` in the form, ``X-Auth-Return-Redirect``, or a
JSON body) and then read ``url`` from every answer, errors included. Routes only scripts
call answer a signed-out caller ``401 {"error": "SessionRequired"}`` (``session_required``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import g, jsonify, redirect, request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wrappers import Response

from webapp.sessions.store import current_session
from webapp.settings import current_settings

F = TypeVar("F", bound=Callable[..., Any])


def session_required(view: F) -> F:
    """Call ``view(session, …)`` for a signed-in browser; answer 401 JSON to anyone else
    (scripts get no redirect to the sign-in page)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is None:
            return jsonify({"error": "SessionRequired"}), 401
        return view(session, *args, **kwargs)

    return cast(F, wrapper)


def under_auth_path() -> bool:
    """Whether this request's path is under the auth base path (matched route or not)."""
    base = current_settings().base_path
    return request.path == base or request.path.startswith(base + "/")


def wants_json() -> bool:
    """Whether the client asked for ``{"url": …}`` instead of a redirect (Auth.js style)."""
    if request.headers.get("X-Auth-Return-Redirect") or json_field_sent():
        return True
    return request.is_json


def json_field_sent() -> bool:
    """Whether the form carries ``json=true``, as next-auth v4's client sends it (v5's
    sends the ``X-Auth-Return-Redirect`` header instead)."""
    return _form_field("json") == "true"


def _form_field(name: str) -> str | None:
    """A form field, or None when the body was refused as too large: the 413's own error
    answer asks too, and reading the body again would raise again (a 500)."""
    try:
        return request.form.get(name)
    except RequestEntityTooLarge:
        return None


def navigate_htmx() -> None:
    """Make this request's redirects (its outcome, or an error's) leave the page when htmx
    sent it: for a poll, whose fragment must not become the next page. Other htmx
    requests (the e-mail form) follow redirects and swap in what they lead to."""
    g.htmx_navigates = True


def send_to(url: str) -> Response:
    """Send the browser to ``url``: a 302, or ``{"url": url}`` when JSON was asked for, or
    ``HX-Redirect`` for an htmx request of a view that called ``navigate_htmx``."""
    if wants_json():
        return jsonify({"url": url})
    if g.get("htmx_navigates") and request.headers.get("HX-Request") == "true":
        return Response(status=204, headers={"HX-Redirect": url})
    return redirect(url, code=302)


def callback_url_param() -> str | None:
    """The request's ``callbackUrl`` (form or query), unchecked; empty is None."""
    value = request.values.get("callbackUrl")
    return value if value else None
