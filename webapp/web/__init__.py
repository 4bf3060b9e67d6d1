"""The HTTP edge: where a request enters, and the only place that reads it or builds an answer.

``auth_routes`` (under AUTH_URL's path), ``account_routes`` and ``account_api`` (the account
area), ``pages`` (the home page), ``language`` and ``health`` parse a request, call one use
case in ``webapp.flows`` (a sign-in goes through the adapter of its provider's kind,
``signin``) and answer: ``answers`` (a redirect, ``{"url"}`` or ``HX-Redirect``),
``error_answers`` (every refusal, a coded error from ``webapp.errors``, as a page, JSON or
redirect), the templates, and ``islands`` (the React islands' page data). ``client_log`` is
the browsers' log beacon; ``extensions`` the CSRF check and Flask-Login.

In an application that adds the facility (``webapp.auth.Auth``), our error answers are for
our requests only: those of our routes and any path under AUTH_URL's path or ``/account``.
The application's other requests get its own error handlers (by code, ``404``, or by
class), as if ours were not there, else Flask's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, request
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from webapp.flows import notices
from webapp.flows.bearer import init_app as init_bearer_tokens
from webapp.flows.provider_tokens import check_revocation_endpoints
from webapp.flows.signin import email
from webapp.mail.delivery import log_delivery
from webapp.passkeys import relying_party
from webapp.providers import build_providers, describe_methods, refuse_serving_without_methods
from webapp.settings import Settings
from webapp.ui.qr import qr_svg
from webapp.web import (
    account_api,
    account_routes,
    auth_routes,
    error_answers,
    health,
    language,
    pages,
)
from webapp.web import metrics as metrics_endpoint
from webapp.web.islands import error_page, provider_chooser

#: Where the account area's routes are (``account_routes``, ``account_api``).
log = logging.getLogger(__name__)
ACCOUNT_PATH = "/account"
#: The error handlers that would answer any request, not only ours: by class, for every
#: HTTP error (CSRF failures are ``400``s), a lost database and any exception.
CATCH_ALL = (HTTPException, CSRFError, OperationalError, Exception)


def init_app(
    app: Flask,
    conf: Settings,
    *,
    site_error_pages: bool,
    own_mail_transport: bool,
    serving: bool,
) -> None:
    """Build the configured providers and the notices' mailer (``own_mail_transport``: the
    application delivers mail itself, in place of EMAIL_SERVER); when ``serving`` (not
    loaded by a command), refuse to serve with no sign-in method and log how mail goes out
    and the sign-in methods that are on; register every route, the error answers (for every
    request of the app with ``site_error_pages``, else for ours) and the islands' page data.
    Our pages' "home" is ``pages.index`` where the app has that page (the standalone app),
    else the app's root."""
    built = build_providers(conf, own_mail_transport=own_mail_transport)
    app.extensions["webapp.providers"] = built
    notices.init_app(app, conf, own_mail_transport=own_mail_transport)
    if serving:
        refuse_serving_without_methods(built, conf)
        log_delivery(conf, own_mail_transport=own_mail_transport)
        log.info("%s", describe_methods(built, conf, own_mail_transport=own_mail_transport))
    init_bearer_tokens(app)
    check_revocation_endpoints(app)
    app.register_blueprint(auth_routes.bp, url_prefix=conf.base_path or None)
    app.register_blueprint(account_routes.bp)
    app.register_blueprint(account_api.bp, url_prefix=ACCOUNT_PATH + "/api")
    app.register_blueprint(language.bp)
    health.init_app(app)
    metrics_endpoint.init_app(app, conf, built)
    if pages.bp.name not in app.blueprints:
        _link_home_to_root(app)
    if site_error_pages:
        error_answers.init_app(app)
    else:
        _init_our_error_answers(app, conf)
    app.add_template_global(provider_chooser.chooser_data)
    app.add_template_global(error_page.error_view)
    app.add_template_global(email.link_lifetime, "email_link_lifetime")
    app.add_template_global(qr_svg)
    app.add_template_global(relying_party.unavailable_reason, "passkey_problem")
    app.add_template_global(relying_party.passkey_texts)


def init_home_page(app: Flask) -> None:
    """Serve our home page at ``/`` (the standalone app; before ``init_app``)."""
    app.register_blueprint(pages.bp)


def _link_home_to_root(app: Flask) -> None:
    """Make ``pages.index``, which our pages link to, the app's root: a URL built only,
    never matched, so the app's own ``/`` answers."""
    app.add_url_rule("/", endpoint=pages.bp.name + ".index", build_only=True)


def our_requests(conf: Settings) -> Callable[[], bool]:
    """Whether this request is one of ours: one of our routes, or any path under AUTH_URL's
    path or the account area's (what our error answers and security headers are for, in
    an application with pages of its own)."""
    ours = {bp.name for bp in (auth_routes.bp, account_routes.bp, account_api.bp, language.bp)}
    ours.add(health.bp.name)
    prefixes = tuple(p for p in (conf.base_path, ACCOUNT_PATH) if p)

    def is_ours() -> bool:
        if request.blueprint in ours:
            return True
        path = request.path
        return any(path == p or path.startswith(p + "/") for p in prefixes)

    return is_ours


def _init_our_error_answers(app: Flask, conf: Settings) -> None:
    """Our error answers for our requests; for the others, the handler the app had for the
    same class before (or Flask's own answer)."""
    # As Flask files them: an HTTP error's class under its code (CSRFError: 400).
    spec = app.error_handler_spec[None]
    before = {cls: spec[_code_of(cls)].get(cls) for cls in CATCH_ALL}
    error_answers.init_app(app)
    is_ours = our_requests(conf)
    for cls in CATCH_ALL:
        handlers = spec[_code_of(cls)]
        handlers[cls] = _for_our_requests(handlers[cls], before[cls], is_ours)


def _for_our_requests(
    ours: Callable[[Any], Any], theirs: Callable[[Any], Any] | None, is_ours: Callable[[], bool]
) -> Callable[[Any], Any]:
    def answer(exc: Exception) -> Any:
        if is_ours():
            return ours(exc)
        if theirs is not None:
            return current_app.ensure_sync(theirs)(exc)
        if isinstance(exc, HTTPException):
            return exc.get_response()
        # Flask's own handling of an unhandled error: the log, then the app's 500 handler.
        raise exc

    return answer


def _code_of(cls: type[Exception]) -> int | None:
    return cls.code if issubclass(cls, HTTPException) else None
