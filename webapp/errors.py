"""How failures become answers: CSRF failures, HTTP errors, outages and unexpected errors.

Nothing internal reaches a page or a JSON body: the details go to the log under the
request id, which the answer carries (``X-Request-ID`` and on the page) so an operator can
find them. Scripts get JSON; people get a readable page.
"""

from __future__ import annotations

import logging

from flask import Flask, g, jsonify, redirect, request
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from webapp import logsafe
from webapp.auth import urls
from webapp.auth.errorpage import render_error_page
from webapp.auth.views import wants_json
from webapp.extensions import db

log = logging.getLogger(__name__)

#: Endpoints whose callers always expect JSON, whatever their Accept header says.
JSON_ENDPOINTS = frozenset(
    {"auth.session_view", "auth.csrf_view", "auth.providers_json", "auth.log_beacon"}
)
#: Seconds a client is asked to wait when the database is unreachable.
RETRY_AFTER = 5


def expects_json() -> bool:
    """Whether this request's caller is a script that wants a JSON answer."""
    if request.endpoint in JSON_ENDPOINTS or wants_json():
        return True
    return request.accept_mimetypes.best == "application/json"


def init_app(app: Flask) -> None:
    """Register the error handlers."""
    app.register_error_handler(CSRFError, _csrf_failed)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(OperationalError, _database_unavailable)
    app.register_error_handler(Exception, _unexpected)


def _csrf_failed(exc: CSRFError) -> Response | tuple[Response, int]:
    # The path is percent-decoded (%0A is a line break) and the method is whatever the
    # client sent: both are encoded. The description is Flask-WTF's own sentence.
    log.warning(
        "CSRF check failed on %s %s: %s",
        logsafe.encode(request.method),
        logsafe.encode(request.path),
        exc.description,
    )
    if expects_json():
        return jsonify({"error": "MissingCSRF"}), 400
    return redirect(urls.auth_url("signin", error="MissingCSRF"))


def _http_error(exc: HTTPException) -> Response | HTTPException:
    if not expects_json():
        return exc
    response = jsonify({"error": exc.name, "requestId": g.get("request_id")})
    response.status_code = exc.code or 500
    if exc.code == 405:
        response.headers["Allow"] = ", ".join(getattr(exc, "valid_methods", None) or [])
    return response


def _database_unavailable(exc: OperationalError) -> tuple[Response | str, int, dict[str, str]]:
    """The database is down, unreachable or overloaded: 503 with Retry-After.

    DBAPI's OperationalError is the class for failures of the database's operation rather
    than of our statements (refused or dropped connections, too many clients, timeouts).
    """
    _rollback_quietly()
    # Render as signed out: the page must not try to read the session again.
    g.auth_session = None
    # The driver's message spans lines (libpq adds hints) and may quote the statement.
    log.error(
        "database unavailable on %s %s: %s",
        logsafe.encode(request.method),
        logsafe.encode(request.path),
        logsafe.encode(exc.orig),
    )
    headers = {"Retry-After": str(RETRY_AFTER)}
    if expects_json():
        body = {"error": "ServiceUnavailable", "requestId": g.get("request_id")}
        return jsonify(body), 503, headers
    return render_error_page(None), 503, headers


def _unexpected(exc: Exception) -> tuple[Response | str, int]:
    _rollback_quietly()
    log.exception(
        "unhandled error on %s %s", logsafe.encode(request.method), logsafe.encode(request.path)
    )
    if expects_json():
        return jsonify({"error": "InternalError", "requestId": g.get("request_id")}), 500
    return render_error_page(None), 500


def _rollback_quietly() -> None:
    try:
        db.session.rollback()
    except DBAPIError:
        log.warning("rollback failed after a database error", exc_info=True)
