"""The HTTP edge: where a request enters, and the only place that reads it or builds an answer.

``auth_routes`` (under AUTH_URL's path), ``account_routes`` and ``account_api`` (the account
area), ``pages`` (the home page), ``language`` and ``health`` parse a request, call one use
case in ``webapp.flows`` (a sign-in goes through the adapter of its provider's kind,
``signin``) and answer: ``answers`` (a redirect, ``{"url"}`` or ``HX-Redirect``),
``error_answers`` (every refusal, a coded error from ``webapp.errors``, as a page, JSON or
redirect), the templates, and ``islands`` (the React islands' page data). ``client_log`` is
the browsers' log beacon; ``extensions`` the CSRF check and Flask-Login.
"""

from __future__ import annotations

from flask import Flask

from webapp.flows import notices
from webapp.flows.bearer import init_app as init_bearer_tokens
from webapp.flows.signin import email
from webapp.passkeys import relying_party
from webapp.providers import build_providers
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
from webapp.web.islands import error_page, provider_chooser


def init_app(app: Flask, conf: Settings) -> None:
    """Build the configured providers and the notices' mailer, register every route, the
    error answers and the islands' page data."""
    app.extensions["webapp.providers"] = build_providers(conf)
    notices.init_app(app, conf)
    init_bearer_tokens(app)
    app.register_blueprint(auth_routes.bp, url_prefix=conf.base_path or None)
    app.register_blueprint(pages.bp)
    app.register_blueprint(account_routes.bp)
    app.register_blueprint(account_api.bp, url_prefix="/account/api")
    app.register_blueprint(language.bp)
    health.init_app(app)
    error_answers.init_app(app)
    app.add_template_global(provider_chooser.chooser_data)
    app.add_template_global(error_page.error_view)
    app.add_template_global(email.link_lifetime, "email_link_lifetime")
    app.add_template_global(qr_svg)
    app.add_template_global(relying_party.unavailable_reason, "passkey_problem")
    app.add_template_global(relying_party.passkey_texts)
