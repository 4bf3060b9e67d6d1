"""The auth routes under AUTH_URL's path (docs/routes.md). Views parse, call one flow, respond."""

from __future__ import annotations

import logging

from flask import (
    Blueprint,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
)
from flask_wtf.csrf import generate_csrf
from werkzeug.wrappers import Response

from webapp.auth import beacon, urls
from webapp.auth.answers import callback_url_param, send_to, session_required
from webapp.auth.bearer import bearer_identity, bearer_session_json
from webapp.auth.errorpage import render_error_page
from webapp.auth.errors import SIGNIN_CODES, code_for, error_page_code
from webapp.auth.flows.provider_tokens import provider_token
from webapp.auth.flows.signout import sign_out
from webapp.auth.hooks import current_hooks, session_read
from webapp.auth.providers import providers
from webapp.auth.providers.base import Outcome, Page, Redirect
from webapp.auth.redirects import is_safe_callback_url
from webapp.auth.sessions import AuthSession, current_session, session_json
from webapp.extensions import csrf
from webapp.ui import csp

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)

NO_STORE = {
    "Cache-Control": "private, no-cache, no-store",
    "Pragma": "no-cache",
    "Expires": "0",
}


@bp.after_request
def _no_store(response: Response) -> Response:
    # Every auth answer is personal (tokens, sessions, forms with CSRF tokens).
    response.headers.update(NO_STORE)
    if request.endpoint == "auth.callback":
        # A callback's URL carries the secret (the e-mail link's token, an OAuth code): no
        # answer there, the confirmation page or an error, may let a Referer take it on to
        # a proxy's log (the page's own CSS and JS requests would). The page has its
        # <meta name="referrer">; this also covers HEAD and answers without it.
        csp.without_referrer(response)
    return response


@bp.get("/providers", provide_automatic_options=False)
def providers_json() -> Response:
    return jsonify({pid: p.public_json() for pid, p in providers().items()})


@bp.get("/session", provide_automatic_options=False)
def session_view() -> Response:
    session = current_session()
    identity = bearer_identity() if session is None else None
    if session is not None:
        user, body = session.user, session_json(session)
    elif identity is not None:
        user, body = identity.user, bearer_session_json(identity)
    else:
        return jsonify(None)
    hook = current_hooks().session
    if hook is not None:
        # Extra fields only: the hook cannot drop the fields an Auth.js client relies on.
        body = {**dict(hook(user=user, session=body)), **body}
    session_read.send(user=user, session=body)
    return jsonify(body)


@bp.get("/token/<provider_id>", provide_automatic_options=False)
@session_required
def provider_token_view(session: AuthSession, provider_id: str) -> Response:
    # A session only: a bearer token must not unlock the user's tokens at other providers.
    return jsonify(provider_token(session.user.id, provider_id).as_json())


@bp.get("/csrf", provide_automatic_options=False)
def csrf_view() -> Response:
    return jsonify({"csrfToken": generate_csrf()})


@bp.get("/signin", provide_automatic_options=False)
def signin_page() -> str:
    code = request.args.get("error")
    callback = callback_url_param()
    return render_template(
        "auth/signin.html",
        providers=list(providers().values()),
        error_code=code if code else None,
        error=code_for(code) if code else None,
        callback_url=callback if is_safe_callback_url(callback) else None,
        email=request.args.get("email", "")[:254],
    )


@bp.post("/signin/<provider_id>", provide_automatic_options=False)
def signin_submit(provider_id: str) -> Response:
    provider = providers().get(provider_id)
    if provider is None:
        return send_to(urls.auth_url("signin", error="Signin", callbackUrl=callback_url_param()))
    outcome = provider.signin(
        form=request.form, query=request.args, callback_url=callback_url_param()
    )
    return _respond(outcome)


@bp.route("/callback/<provider_id>", methods=["GET", "POST"], provide_automatic_options=False)
@csrf.exempt
def callback(provider_id: str) -> Response:
    provider = providers().get(provider_id)
    if provider is None:
        return send_to(urls.auth_url("error", error="Signin"))
    if request.method == "POST" and provider.callback_needs_csrf:
        csrf.protect()
    outcome = provider.callback(
        method=request.method,
        args=request.args,
        form=request.form,
        callback_url=callback_url_param(),
    )
    return _respond(outcome)


@bp.get("/signout", provide_automatic_options=False)
def signout_page() -> str:
    callback = callback_url_param()
    return render_template(
        "auth/signout.html",
        session=current_session(),
        callback_url=callback if is_safe_callback_url(callback) else None,
    )


@bp.post("/signout", provide_automatic_options=False)
def signout_submit() -> Response:
    return send_to(sign_out(callback_url=callback_url_param()))


@bp.get("/verify-request", provide_automatic_options=False)
def verify_request_page() -> str:
    provider_id = request.args.get("provider")
    return render_template(
        "auth/verify_request.html",
        # Only a known id reaches the page: it becomes part of the code form's action.
        provider=provider_id if provider_id in providers() else None,
        type=request.args.get("type"),
    )


@bp.get("/error", provide_automatic_options=False)
def error_page() -> Response | tuple[str, int]:
    code = request.args.get("error")
    if code in SIGNIN_CODES:
        return redirect(urls.auth_url("signin", error=code, callbackUrl=callback_url_param()))
    return render_error_page(code), error_page_code(code).status


@bp.post("/_log", provide_automatic_options=False)
@csrf.exempt
def log_beacon() -> Response | tuple[Response, int]:
    # Not state-changing (it only writes to the log), so no CSRF, as in Auth.js; it is
    # size-checked and rate limited per IP instead.
    problem = beacon.accept(request)
    if problem is not None:
        return jsonify({"error": problem}), 400 if problem != "RateLimited" else 429
    return Response(status=204)


def _respond(outcome: Outcome) -> Response:
    if isinstance(outcome, Redirect):
        return send_to(outcome.url)
    assert isinstance(outcome, Page)
    html = render_template(outcome.template, **outcome.context)
    return current_app.make_response((html, outcome.status))
