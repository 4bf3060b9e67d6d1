"""The auth routes under AUTH_URL's path (docs/routes.md). Views parse, call one flow, respond."""

from __future__ import annotations

import logging

from flask import (
    Blueprint,
    abort,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.wrappers import Response

from webapp.core import urls
from webapp.core.cache_headers import mark_personal
from webapp.core.hooks import current_hooks, session_read
from webapp.core.redirects import is_safe_callback_url, resolve_redirect
from webapp.errors import SIGNIN_CODES, code_for, error_page_code, known_code
from webapp.flows.backchannel import BackchannelLogoutOff, backchannel_logout
from webapp.flows.bearer import bearer_session_json
from webapp.flows.provider_tokens import provider_token
from webapp.flows.saml_logout import LogoutRefused, single_logout
from webapp.flows.signin import passkey
from webapp.flows.signin.device import (
    DeviceEnded,
    DeviceFlowOff,
    check_device_signin,
    device_clients,
    handle_cookie_name,
    start_device_signin,
)
from webapp.flows.signin.email import purpose_of
from webapp.flows.signin.second_factor import WrongCode, current_challenge, pass_with_code
from webapp.flows.signout import (
    finish_provider_logout,
    sign_out,
    signs_out_at_provider,
    state_cookie_name,
)
from webapp.flows.sso.routing import continue_choices
from webapp.i18n import gettext, ngettext
from webapp.oauth.logout_token import InvalidLogoutToken
from webapp.providers import providers, providers_body
from webapp.providers.saml import SamlProvider
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession, current_session, session_json
from webapp.storage import transactions
from webapp.telemetry.logsafe import encode
from webapp.ui import csp
from webapp.web import client_log, signin
from webapp.web.answers import (
    callback_url_param,
    navigate_htmx,
    send_to,
    session_required,
)
from webapp.web.bearer import bearer_identity
from webapp.web.extensions import csrf
from webapp.web.islands.error_page import render_error_page
from webapp.web.signin.outcome import Outcome, Page, Redirect

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)
# The templates' links to the pages an application may replace (``auth_page_url("signin")``).
bp.add_app_template_global(urls.page_path, "auth_page_url")


@bp.after_request
def _personal(response: Response) -> Response:
    # Every auth answer is personal (tokens, sessions, forms with CSRF tokens), errors
    # raised before the view included (a failed CSRF check).
    mark_personal()
    if request.endpoint == "auth.callback":
        # A callback's URL carries the secret (the e-mail link's token, an OAuth code): no
        # answer there, the confirmation page or an error, may let a Referer take it on to
        # a proxy's log (the page's own CSS and JS requests would). The page has its
        # <meta name="referrer">; this also covers HEAD and answers without it.
        csp.without_referrer(response)
    return response


@bp.get("/providers", provide_automatic_options=False)
def providers_json() -> Response:
    return current_app.response_class(providers_body(), mimetype="application/json")


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
    return jsonify({"csrfToken": csrf.token()})


@bp.get("/signin", provide_automatic_options=False)
def signin_page() -> str:
    asked = request.args.get("error")
    callback = callback_url_param()
    email = request.args.get("email", "")[:254]
    return render_template(
        "auth/signin.html",
        providers=list(providers().values()),
        # An unknown code gets the generic message, and is not shown.
        error_code=known_code(asked),
        error=code_for(asked) if asked else None,
        callback_url=callback if is_safe_callback_url(callback) else None,
        email=email,
        # "Continue with" the provider of the address's domain (docs/how-to/sso-by-domain.md).
        sso_choices=continue_choices(email, asked),
    )


@bp.post("/signin/<provider_id>", provide_automatic_options=False)
def signin_submit(provider_id: str) -> Response:
    provider = providers().get(provider_id)
    if provider is None:
        return send_to(urls.page_url("signin", error="Signin", callbackUrl=callback_url_param()))
    outcome = signin.adapter_for(provider).signin(
        provider, form=request.form, query=request.args, callback_url=callback_url_param()
    )
    return _respond(outcome)


@bp.route("/callback/<provider_id>", methods=["GET", "POST"], provide_automatic_options=False)
@csrf.exempt
def callback(provider_id: str) -> Response:
    provider = providers().get(provider_id)
    if provider is None:
        return send_to(urls.page_url("error", error="Signin"))
    if request.method == "POST" and provider.callback_needs_csrf:
        csrf.protect()
    outcome = signin.adapter_for(provider).callback(
        provider,
        method=request.method,
        args=request.args,
        form=request.form,
        callback_url=callback_url_param(),
    )
    return _respond(outcome)


@bp.get("/saml/<provider_id>/metadata", provide_automatic_options=False)
def saml_metadata(provider_id: str) -> Response:
    # Our service provider's metadata; its URL is our entity ID (Auth.js has no SAML).
    provider = providers().get(provider_id)
    if not isinstance(provider, SamlProvider):
        abort(404)
    return current_app.response_class(
        provider.service_provider.metadata_xml(), mimetype="application/samlmetadata+xml"
    )


@bp.get("/saml/<provider_id>/slo", provide_automatic_options=False)
def saml_single_logout(provider_id: str) -> Response:
    # The IdP's LogoutResponse to our sign-out, or its own LogoutRequest (HTTP-Redirect):
    # the signature over the query string as received is the proof.
    provider = providers().get(provider_id)
    if not isinstance(provider, SamlProvider):
        abort(404)
    try:
        destination = single_logout(
            provider,
            request.query_string.decode("latin-1"),
            is_response="SAMLResponse" in request.args,
        )
    except LogoutRefused as exc:
        transactions.discard()
        log.warning("%s", encode(str(exc)))
        abort(400)
    return redirect(destination, code=302)


@bp.get("/webauthn-options/<provider_id>", provide_automatic_options=False)
def webauthn_options(provider_id: str) -> Response | tuple[Response, int]:
    # Auth.js's shapes: {"action", "options"}; 400 "Invalid action"; 404 for other ids.
    provider = providers().get(provider_id)
    if provider is None or provider.type != "webauthn":
        abort(404)
    session = current_session()
    # Without ``action``, a signed-out browser authenticates (Auth.js infers the same).
    action = request.args.get("action") or ("" if session else passkey.AUTHENTICATE)
    try:
        options = passkey.options(action, session, client_address=request.remote_addr)
    except passkey.InvalidAction:
        return jsonify({"error": "Invalid action"}), 400
    except passkey.PasskeysUnavailable:
        return jsonify({"error": "PasskeysUnavailable"}), 400
    except passkey.SessionRequired:
        return jsonify({"error": "SessionRequired"}), 401
    except passkey.RecentSignInRequired:
        url = urls.origin() + reauthentication.confirm_url(
            url_for("account.overview") + "#passkeys"
        )
        return jsonify({"error": "RecentSignInRequired", "url": url}), 403
    except passkey.Throttled:
        return jsonify({"error": "RateLimited"}), 429
    return jsonify({"action": action, "options": options})


@bp.get("/signout", provide_automatic_options=False)
def signout_page() -> str:
    callback = callback_url_param()
    session = current_session()
    provider = providers().get(session.provider) if session and session.provider else None
    return render_template(
        "auth/signout.html",
        session=session,
        callback_url=callback if is_safe_callback_url(callback) else None,
        # Named on the page when signing out here also signs out there.
        provider_logout=provider if provider and signs_out_at_provider(provider.id) else None,
    )


@bp.post("/signout", provide_automatic_options=False)
def signout_submit() -> Response:
    return send_to(sign_out(callback_url=callback_url_param()))


@bp.get("/signout/callback", provide_automatic_options=False)
def signout_callback() -> Response:
    # The identity provider sends the browser back here after its own sign-out.
    destination = finish_provider_logout(
        request.args.get("state"), state_cookie=request.cookies.get(state_cookie_name())
    )
    return redirect(destination, code=302)


@bp.post("/backchannel-logout/<provider_id>", provide_automatic_options=False)
@csrf.exempt
def backchannel_logout_view(provider_id: str) -> Response | tuple[Response, int]:
    # Server to server, from the identity provider: the signed logout token is the proof.
    try:
        backchannel_logout(provider_id, request.form.get("logout_token"))
    except BackchannelLogoutOff:
        abort(404)
    except InvalidLogoutToken as exc:
        transactions.discard()
        log.warning("%s: logout token refused: %s", provider_id, encode(str(exc)))
        return jsonify({"error": "invalid_request"}), 400
    return Response(status=200)


@bp.get("/device", provide_automatic_options=False)
def device_page() -> str:
    callback = callback_url_param()
    return render_template(
        "auth/device.html",
        clients=device_clients(),
        callback_url=callback if is_safe_callback_url(callback) else None,
    )


@bp.post("/device/<provider_id>", provide_automatic_options=False)
def device_start(provider_id: str) -> Response:
    try:
        start_device_signin(
            provider_id,
            callback_url=callback_url_param(),
            handle_cookie=request.cookies.get(handle_cookie_name(provider_id)),
            client_address=request.remote_addr,
        )
    except DeviceFlowOff:
        abort(404)
    # See other: a reload of the code page polls; it does not ask for a new code.
    return redirect(urls.auth_url(f"device/{provider_id}/status"), code=303)


@bp.get("/device/<provider_id>/status", provide_automatic_options=False)
def device_status(provider_id: str) -> Response | str | tuple[str, int, dict[str, str]]:
    # The page's htmx poll: a sign-in (or its refusal) leaves the page.
    navigate_htmx()
    try:
        outcome = check_device_signin(
            provider_id, handle_cookie=request.cookies.get(handle_cookie_name(provider_id))
        )
    except DeviceFlowOff:
        abort(404)
    if isinstance(outcome, str):
        return send_to(outcome)
    if isinstance(outcome, DeviceEnded) and not outcome.expired and current_session():
        # Finished in another tab of this browser.
        return send_to(resolve_redirect(None))
    ended = outcome if isinstance(outcome, DeviceEnded) else None
    if request.headers.get("HX-Request") != "true":
        return render_template("auth/device_code.html", prompt=outcome, ended=ended)
    if ended is None:
        # Only the status line: the code, the QR code and the focus stay as they are.
        return render_template("auth/_device_status.html", prompt=outcome)
    html = render_template("auth/_device_card.html", prompt=None, ended=ended)
    return html, 200, {"HX-Retarget": "#device-card", "HX-Reswap": "outerHTML"}


@bp.get("/second-factor", provide_automatic_options=False)
def second_factor_page() -> str:
    return render_template("auth/second_factor.html", challenge=current_challenge(), problem=None)


@bp.post("/second-factor", provide_automatic_options=False)
def second_factor_submit() -> Response | tuple[str, int]:
    try:
        return send_to(
            pass_with_code(request.form.get("code", ""), client_address=request.remote_addr)
        )
    except WrongCode as exc:
        transactions.discard()
        # How many tries are left, as the e-mail code's page says (the throttles' count).
        message = (
            ngettext(
                "That code is not right. You can try %(num)d more time.",
                "That code is not right. You can try %(num)d more times.",
                exc.tries_left,
            )
            if exc.tries_left
            else gettext(
                "That code is not right, and that was the last try for now. Wait a while, "
                "then sign in again."
            )
        )
        page = render_template(
            "auth/second_factor.html",
            challenge=current_challenge(),
            problem={"code": "WrongCode", "message": message},
        )
        return page, 400


@bp.get("/verify-request", provide_automatic_options=False)
def verify_request_page() -> str:
    provider_id = request.args.get("provider")
    return render_template(
        "auth/verify_request.html",
        # Only a known id reaches the page: it becomes part of the code form's action.
        provider=provider_id if provider_id in providers() else None,
        type=request.args.get("type"),
        # A confirmation from the account area (deleting it…): the page says what for.
        purpose=purpose_of(request.args.get("purpose")),
    )


@bp.get("/error", provide_automatic_options=False)
def error_page() -> Response | tuple[str, int]:
    code = known_code(request.args.get("error"))
    if code in SIGNIN_CODES:
        return redirect(urls.page_url("signin", error=code, callbackUrl=callback_url_param()))
    return render_error_page(code), error_page_code(code).status


@bp.post("/_log", provide_automatic_options=False)
@csrf.exempt
def log_beacon() -> Response | tuple[Response, int]:
    # Not state-changing (it only writes to the log), so no CSRF, as in Auth.js; it is
    # size-checked and rate limited per IP instead.
    problem = client_log.accept(request)
    if problem is not None:
        return jsonify({"error": problem}), 400 if problem != "RateLimited" else 429
    return Response(status=204)


def _respond(outcome: Outcome) -> Response:
    if isinstance(outcome, Redirect):
        return send_to(outcome.url)
    assert isinstance(outcome, Page)
    html = render_template(outcome.template, **outcome.context)
    return current_app.make_response((html, outcome.status))
