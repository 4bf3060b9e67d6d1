"""The sign-in facility: the routes under AUTH_URL's path and everything behind them.

Read it top down (README, "Code map"): ``views`` parses a request and calls a provider
(``providers``: one thin adapter per kind), which calls one use case (``flows``: e-mail,
OAuth, credentials, linking, finishing a sign-in); flows use the building blocks beside
them (``sessions``, ``cookies``, ``redirects``, ``ratelimit``, ``mail``, …), the OAuth
protocol pieces (``oauth``) and ``webapp.models``. Nothing below imports anything above.
"""

from __future__ import annotations

from flask import Flask

from webapp.auth import bearer, chooser, errorpage, notices, passkeys
from webapp.auth.flows import email
from webapp.auth.providers import build_providers
from webapp.auth.views import bp
from webapp.settings import Settings
from webapp.ui.qr import qr_svg


def init_app(app: Flask, conf: Settings) -> None:
    """Build the configured providers and the notices' mailer, register the routes and the
    islands' page data."""
    app.extensions["webapp.providers"] = build_providers(conf)
    notices.init_app(app, conf)
    bearer.init_app(app)
    app.register_blueprint(bp, url_prefix=conf.base_path or None)
    app.add_template_global(chooser.chooser_data)
    app.add_template_global(errorpage.error_view)
    app.add_template_global(email.link_lifetime, "email_link_lifetime")
    app.add_template_global(qr_svg)
    app.add_template_global(passkeys.unavailable_reason, "passkey_problem")
    app.add_template_global(passkeys.passkey_texts)
