"""Requests by route: a WSGI layer around Flask's, timing each answer and counting it by the
rule of the route it matched (``/auth/callback/<provider_id>``), never by its path.

The path is the client's to choose; the rules are the URL map's, a fixed list. A request
that matched none (a 404, a 405, a host refused before routing) is ``unmatched``, and a
method outside ``METHODS`` is ``other``. The time runs until the app hands its answer to the
server (the body is ready, except a file or a stream, which the server then sends).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from webapp.metrics.families import HTTP_REQUEST_SECONDS, HTTP_REQUESTS, OTHER, bounded

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: The methods a label names; any other is ``other``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
#: Where ``_note_route`` leaves the matched rule for the layer, in the WSGI environ (Flask
#: takes its request object out of the environ before the layer sees it again).
ROUTE_KEY = "webapp.metrics.route"


class RouteTimer:
    """WSGI middleware: time and count each answer by its route's rule (``families``)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        began = time.perf_counter()
        status: list[str] = []

        def record_status(
            line: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            status[:] = [line.split(None, 1)[0]]
            return start_response(line, headers, exc_info)

        try:
            return self.app(environ, record_status)
        finally:
            took = time.perf_counter() - began
            method = bounded(environ.get("REQUEST_METHOD"), METHODS)
            route = environ.get(ROUTE_KEY) or UNMATCHED
            HTTP_REQUEST_SECONDS.labels(route, method).observe(took)
            code = status[0] if status and status[0].isdigit() else OTHER
            HTTP_REQUESTS.labels(route, method, code).inc()


def _note_route(_exc: BaseException | None) -> None:
    """Leave the rule this request matched for ``RouteTimer`` (a teardown: it runs for
    every request that reached Flask, whatever its hooks and view did)."""
    rule = request.url_rule
    if rule is not None:
        request.environ[ROUTE_KEY] = rule.rule


def init_app(app: Flask) -> None:
    """Time ``app``'s requests (inside the layers ``webapp.auth.Auth`` puts around it)."""
    if not isinstance(app.wsgi_app, RouteTimer):
        app.wsgi_app = RouteTimer(app.wsgi_app)  # type: ignore[method-assign]
        app.teardown_request(_note_route)
