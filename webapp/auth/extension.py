"""The sign-in facility as a Flask extension: ``Auth(app)``, or ``Auth()`` then
``init_app(app)``.

The settings are the app's ``app.config``, under the names the environment uses
(``AUTH_URL``, ``AUTH_SECRET``, ``DATABASE_URL``, …; the providers as a list of tables,
``AUTH_PROVIDERS``), over the TOML file AUTH_CONFIG names, over ``environ`` when it is
given (the process environment is not read otherwise). DATABASE_URL defaults to the app's
``SQLALCHEMY_DATABASE_URI``. A bad setting raises ``ConfigError`` naming it.

What it adds to the app: our routes (under AUTH_URL's path, ``/account``, ``/language``,
``/assets``, ``/healthz`` and ``/readyz``; ``/metrics`` with AUTH_METRICS_TOKEN set), our
templates after the app's own (its ``templates/auth/signin.html`` replaces ours), our
static files, Flask-SQLAlchemy, Flask-Login (``login_required``, ``current_user``),
Flask-Babel, the CSRF check on every form and JSON post, the security headers, the ``flask
auth`` commands, and three WSGI layers around the whole app: the request id, the trusted
proxies' headers and the host check. Flask-wide settings the app has chosen
(``SECRET_KEY``, ``MAX_CONTENT_LENGTH``, …) are kept; those it left at Flask's defaults
get ours.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask, redirect, request
from flask.json.provider import DefaultJSONProvider
from flask.sessions import SecureCookieSessionInterface
from werkzeug.wrappers import Response

from webapp import i18n, ui, web
from webapp.browser_state.cookies import CSRF_COOKIE, apply_cookies, cookie_name
from webapp.browser_state.flask_session import CookieSessionInterface
from webapp.cli import auth_cli
from webapp.core import hosts, proxies, urls
from webapp.core.hooks import AuthHooks
from webapp.core.jsonsafe import JSONProvider
from webapp.sessions.store import AuthUser, current_session
from webapp.settings import Settings, Sources, install, settings_from
from webapp.settings.dev_server import dev_server, loaded_by_a_command
from webapp.storage import database, sql_counts, transactions
from webapp.telemetry import logs
from webapp.ui.assets import TEMPLATES_DIR
from webapp.web import error_answers, health
from webapp.web import metrics as metrics_endpoint
from webapp.web.bearer import bearer_identity
from webapp.web.extensions import csrf, login_manager

log = logging.getLogger(__name__)

#: Our requests' body limit, where the app leaves Flask's (none for the body, 500 kB for
#: a form's fields in memory).
BODY_LIMIT = 64 * 1024
#: The extensions registered once per app, which ``Auth`` registers itself.
SHARED_EXTENSIONS = {
    "sqlalchemy": "Flask-SQLAlchemy (use our `db`: `from webapp.extensions import db`)",
    "babel": "Flask-Babel",
}


class Auth:
    """The sign-in facility in a Flask app.

    ``hooks``: the application's decisions (``AuthHooks``). ``environ``: an environment to
    read settings from, below ``app.config`` (``os.environ`` to read the process's).
    ``site_error_pages``: our error pages answer every request of the app, not only ours
    (the standalone app).
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        hooks: AuthHooks | None = None,
        environ: Mapping[str, str] | None = None,
        site_error_pages: bool = False,
    ) -> None:
        self.hooks = hooks or AuthHooks()
        self.environ = environ
        self.site_error_pages = site_error_pages
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read the settings from ``app.config`` and add the facility to ``app``."""
        _refuse_second_instances(app)
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
        sources = Sources.of_app(
            app.config,
            self.environ,
            root_path=app.root_path,
            defaults={"EMAIL_TEMPLATES": _email_templates_of(app)},
        )
        # The application's own mail transport, set by now, stands in for EMAIL_SERVER.
        own_mail_transport = self.hooks.send_mail is not None
        conf = settings_from(
            sources,
            instance_path=app.instance_path,
            served=dev_server(),
            own_mail_transport=own_mail_transport,
        )
        install(app, conf)
        app.extensions["webapp.hooks"] = self.hooks
        app.extensions["webapp.auth"] = self
        _configure_flask(app, conf)
        if type(app.session_interface) is SecureCookieSessionInterface:
            app.session_interface = CookieSessionInterface()
        if type(app.json) is DefaultJSONProvider:
            app.json = JSONProvider(app)

        logs.init_app(app, conf)
        database.init_app(app)
        transactions.init_app(app)
        if conf.sql_count_headers:
            sql_counts.init_app(app, conf)
        csrf.init_app(app)
        _init_login(app)
        # A command (flask auth cleanup) serves nothing: no start-up lines about serving.
        serving = not loaded_by_a_command()
        web.init_app(
            app,
            conf,
            site_error_pages=self.site_error_pages,
            own_mail_transport=own_mail_transport,
            serving=serving,
        )
        ui.init_app(app, conf, ours=None if self.site_error_pages else web.our_requests(conf))
        i18n.init_app(app, conf)
        app.cli.add_command(auth_cli)
        app.after_request(apply_cookies)

        @app.context_processor
        def _brand() -> dict[str, Any]:
            return {"brand": conf.brand, "auth_base": conf.base_path}

        # Outermost first: the request's id, the trusted proxies' headers, then the host
        # check, then Flask. A foreign host is refused before anything else runs.
        app.wsgi_app = logs.wrap(  # type: ignore[method-assign]
            proxies.wrap(hosts.wrap(app, conf, error_answers.expects_json), conf.trusted_proxies),
            quiet_paths=health.PATHS | metrics_endpoint.quiet_paths(conf),
        )
        if not serving:
            return
        log.info(
            "serving %s; trusting %s; also answering to %s",
            conf.auth_url,
            conf.trusted_proxies.describe(),
            ", ".join(conf.allowed_hosts) or "no other host",
        )


def _refuse_second_instances(app: Flask) -> None:
    """Refuse an app that has its own instance of an extension we register: the second
    would replace the first's configuration, and one of the two would quietly misbehave."""
    if getattr(app, "login_manager", login_manager) is not login_manager:
        raise RuntimeError(
            "the app has its own Flask-Login LoginManager: the sign-in facility sets up "
            "Flask-Login itself (current_user and login_required work with it); remove yours"
        )
    for key, name in SHARED_EXTENSIONS.items():
        if key in app.extensions:
            raise RuntimeError(
                f"the app has its own {name}: the sign-in facility registers its own "
                "instance, and an app can have only one; remove yours"
            )


def _email_templates_of(app: Flask) -> str | None:
    """The app's own ``templates/auth/email`` folder, whose messages replace ours."""
    if app.template_folder is None:
        return None
    folder = (Path(app.root_path) / app.template_folder / "auth" / "email").resolve()
    return str(folder) if folder.is_dir() and folder != TEMPLATES_DIR / "auth" / "email" else None


def _configure_flask(app: Flask, conf: Settings) -> None:
    defaults = app.default_config
    keys = conf.derive_keys("flask-session")
    own = {
        "SECRET_KEY": keys[0].hex(),
        "SECRET_KEY_FALLBACKS": [k.hex() for k in keys[1:]],
        "PREFERRED_URL_SCHEME": "https" if conf.is_https else "http",
        "MAX_CONTENT_LENGTH": BODY_LIMIT,
        "MAX_FORM_MEMORY_SIZE": BODY_LIMIT,
    }
    if app.config.get("SECRET_KEY"):
        # The app's own key signs Flask's session; no fallbacks is an empty list.
        own["SECRET_KEY_FALLBACKS"] = app.config.get("SECRET_KEY_FALLBACKS") or []
    for name, value in own.items():
        if app.config.get(name) == defaults.get(name):
            app.config[name] = value
    app.config.update(
        SQLALCHEMY_DATABASE_URI=conf.database_url,
        SQLALCHEMY_ENGINE_OPTIONS=database.engine_options(
            conf.database_url,
            pool_size=conf.db_pool_size,
            max_overflow=conf.db_max_overflow,
            pre_ping=conf.db_pool_pre_ping,
            transaction_pooler=conf.transaction_pooler,
        ),
        # Flask's own session cookie only carries the CSRF secret (Flask-WTF keeps it there).
        SESSION_COOKIE_NAME=cookie_name(CSRF_COOKIE, host_only=True, https=conf.is_https),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=conf.is_https,
        WTF_CSRF_FIELD_NAME="csrfToken",
        WTF_CSRF_HEADERS=["X-CSRFToken", "X-CSRF-Token"],
        # The token lives as long as the CSRF cookie (the browser session), as in Auth.js:
        # a sign-in page left open over lunch still works.
        WTF_CSRF_TIME_LIMIT=None,
        # Its Referer check compares with the request's Host; ours (extensions.CSRFProtect)
        # compares Origin or Referer with AUTH_URL.
        WTF_CSRF_SSL_STRICT=False,
    )


def _init_login(app: Flask) -> None:
    login_manager.init_app(app)
    # Sessions live in the database; Flask-Login must not keep its own state in the cookie.
    login_manager.session_protection = None

    @login_manager.request_loader  # type: ignore[untyped-decorator]
    def _load_user(_request: Any) -> AuthUser | None:
        session = current_session()
        if session is not None:
            return session.user
        # An API caller's provider access token, where a provider accepts them.
        identity = bearer_identity()
        return identity.user if identity else None

    @login_manager.unauthorized_handler  # type: ignore[untyped-decorator]
    def _unauthorized() -> Response:
        here = urls.origin() + request.full_path.rstrip("?")
        return redirect(urls.page_url("signin", error="SessionRequired", callbackUrl=here))
