"""How failures become answers, in one place: coded refusals, CSRF failures, HTTP errors,
outages and unexpected errors.

Nothing internal reaches a page or a JSON body: the details go to the log under the
request id, which the answer carries (``X-Request-ID`` and on the page) so an operator can
find them. Scripts get JSON; people get a readable page.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, jsonify, redirect, request
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from webapp.audit import trail
from webapp.core import urls
from webapp.core.cache_headers import mark_personal
from webapp.errors import SIGNIN_CODES, AccountError, AuthError, code_for
from webapp.flows.bearer import InvalidBearerToken
from webapp.providers import providers
from webapp.sessions import reauthentication
from webapp.sessions.store import current_session, treat_as_signed_out
from webapp.settings import current_settings
from webapp.storage import transactions
from webapp.telemetry import logsafe
from webapp.telemetry.logs import current_request_id
from webapp.web.answers import (
    callback_url_param,
    json_field_sent,
    send_to,
    under_auth_path,
    wants_json,
)
from webapp.web.islands.error_page import render_error_page

log = logging.getLogger(__name__)

#: Endpoints whose callers always expect JSON, whatever their Accept header says.
JSON_ENDPOINTS = frozenset(
    {
        "auth.session_view",
        "auth.csrf_view",
        "auth.providers_json",
        "auth.log_beacon",
        "auth.provider_token_view",
        "auth.webauthn_options",
    }
)
#: Blueprints that answer only scripts.
JSON_BLUEPRINTS = frozenset({"account_api"})
#: Seconds a client is asked to wait when the database is unreachable.
RETRY_AFTER = 5


def expects_json() -> bool:
    """Whether this request's caller is a script that wants a JSON answer."""
    if request.endpoint in JSON_ENDPOINTS or request.blueprint in JSON_BLUEPRINTS:
        return True
    if wants_json():
        return True
    return request.accept_mimetypes.best == "application/json"


def follows_urls() -> bool:
    """Whether the caller is an Auth.js client of the auth routes in JSON mode: it reads
    ``url`` from every answer (``new URL(data.url)``), errors included, so each error must
    name the page Auth.js would send the browser to."""
    return wants_json() and under_auth_path()


def _error_body(error: str) -> dict[str, Any]:
    """A JSON error's body: the error's name and the request id (for the logs); for an
    Auth.js client, also the error page's URL to follow."""
    body: dict[str, Any] = {"error": error, "requestId": current_request_id()}
    if follows_urls():
        # A code-like name in the URL ("Not Found" → "NotFound").
        body["url"] = urls.page_url("error", error="".join(error.split()))
    return body


def init_app(app: Flask) -> None:
    """Register the error handlers."""
    app.register_error_handler(AuthError, _signin_failed)
    app.register_error_handler(AccountError, _account_refused)
    app.register_error_handler(InvalidBearerToken, _bearer_refused)
    app.register_error_handler(CSRFError, _csrf_failed)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(OperationalError, _database_unavailable)
    app.register_error_handler(Exception, _unexpected)


def _signin_failed(exc: AuthError) -> Response:
    """A sign-in flow failed: nothing it wrote stays (unless it must: ``keep``), but the
    failure is on record (the flow's own, else one here); the browser goes to the error
    route."""
    if not trail.refusal_recorded():
        trail.record(trail.Event.SIGNIN, provider=_route_provider(), error=exc.code)
    transactions.settle_refusal(keep=exc.keep)
    # The detail may quote the provider's answer or the request (an address, a URL).
    log.warning("auth error %s: %s", exc.code, logsafe.encode(logsafe.redact(exc.detail or "-")))
    # @auth/core names the credentials failure's kind in ``code`` (its clients return it).
    kind = "credentials" if exc.code == "CredentialsSignin" else None
    # A browser goes through the error route, which sends sign-in codes on to the sign-in
    # page; a script is given that page at once, as @auth/core does, and so is a browser
    # when the error page is the application's own (it would not send them on).
    at_once = follows_urls() or "error" in current_settings().custom_pages
    page: urls.Page = "signin" if at_once and exc.code in SIGNIN_CODES else "error"
    response = send_to(
        urls.page_url(page, error=exc.code, code=kind, callbackUrl=callback_url_param())
    )
    if kind and json_field_sent():
        # next-auth v4's server answers its client's ``json=true`` with 401 here, and
        # applications test ``res.ok``; v5's clients send the header and expect 200.
        response.status_code = 401
    return response


def _route_provider() -> str | None:
    """The configured provider this request's route names, if any."""
    named = (request.view_args or {}).get("provider_id")
    return named if isinstance(named, str) and named in providers() else None


def _account_refused(exc: AccountError) -> tuple[Response | str, int]:
    """An account action was refused: nothing it wrote stays (unless it must); JSON for
    scripts."""
    transactions.settle_refusal(keep=exc.keep)
    status = code_for(exc.code).status
    if not expects_json():
        # The account pages show refusals in place; one that escapes them gets the page.
        return render_error_page(exc.code), status
    body = {"error": exc.code, "message": exc.message}
    if exc.code == "RecentSignInRequired":
        body["confirmUrl"] = urls.origin() + reauthentication.confirm_url("/account")
    response = jsonify(body)
    if status == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER)
    return response, status


def recent_signin_needed() -> Response | tuple[Response, int]:
    """Answer a caller whose sign-in is not recent enough for this request: a browser goes
    to confirm it is them and is brought back to this request's URL; a script, or a bearer
    token's caller (it has no session to confirm), gets 403 naming that page, as the
    account API answers."""
    confirm = urls.origin() + reauthentication.confirm_url(request.full_path.rstrip("?"))
    if expects_json() or current_session() is None:
        code = "RecentSignInRequired"
        body = {"error": code, "message": code_for(code).texts()["message"], "confirmUrl": confirm}
        return jsonify(body), 403
    return redirect(confirm)


def _bearer_refused(exc: InvalidBearerToken) -> tuple[Response, int, dict[str, str]]:
    """A bearer token we do not accept (RFC 6750 §3.1); its caller is a script."""
    transactions.discard()
    log.info("bearer token refused: %s", logsafe.encode(str(exc)))
    challenge = 'Bearer error="invalid_token"'
    body = {"error": "invalid_token", "requestId": current_request_id()}
    return jsonify(body), 401, {"WWW-Authenticate": challenge}


def _csrf_failed(exc: CSRFError) -> Response | tuple[Response, int]:
    # The path is percent-decoded (%0A is a line break) and the method is whatever the
    # client sent: both are encoded. The description is Flask-WTF's own sentence.
    log.warning(
        "CSRF check failed on %s %s: %s",
        logsafe.encode(request.method),
        logsafe.encode(request.path),
        exc.description,
    )
    if follows_urls():
        # As @auth/core answers: the sign-in page with the error, to follow or to read.
        return jsonify({"url": urls.page_url("signin", error="MissingCSRF")})
    if expects_json():
        return jsonify({"error": "MissingCSRF"}), 400
    return redirect(urls.page_url("signin", error="MissingCSRF"))


def _http_error(exc: HTTPException) -> Response:
    """An HTTP error (404, 405, 413, …): the site's own page, or JSON; the framework's
    headers (``Allow``, ``Retry-After``) are kept."""
    status = exc.code or 500
    if expects_json():
        response: Response = jsonify(_error_body(exc.name))
    else:
        response = Response(render_error_page(None, status=status), mimetype="text/html")
    response.status_code = status
    for name, value in exc.get_headers():
        if name not in ("Content-Type", "Content-Length"):
            response.headers[name] = value
    if under_auth_path():
        # No auth route matched, so none marked it: under the auth path all is personal.
        mark_personal()
    return response


def _database_unavailable(exc: OperationalError) -> tuple[Response | str, int, dict[str, str]]:
    """The database is down, unreachable or overloaded: 503 with Retry-After.

    DBAPI's OperationalError is the class for failures of the database's operation rather
    than of our statements (refused or dropped connections, too many clients, timeouts).
    """
    _rollback_quietly()
    # Render as signed out: the page must not try to read the session again.
    treat_as_signed_out()
    # The driver's message spans lines (libpq adds hints) and may quote the statement.
    log.error(
        "database unavailable on %s %s: %s",
        logsafe.encode(request.method),
        logsafe.encode(request.path),
        logsafe.encode(exc.orig),
    )
    headers = {"Retry-After": str(RETRY_AFTER)}
    if expects_json():
        return jsonify(_error_body("ServiceUnavailable")), 503, headers
    return render_error_page(None), 503, headers


def _unexpected(exc: Exception) -> tuple[Response | str, int]:
    _rollback_quietly()
    log.exception(
        "unhandled error on %s %s", logsafe.encode(request.method), logsafe.encode(request.path)
    )
    if expects_json():
        return jsonify(_error_body("InternalError")), 500
    return render_error_page(None), 500


def _rollback_quietly() -> None:
    try:
        transactions.discard()
    except DBAPIError:
        log.warning("rollback failed after a database error", exc_info=True)
