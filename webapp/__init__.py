"""A Flask web application with a delegated sign-in facility in the style of Auth.js."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import flask
from flask import Flask, redirect, request
from werkzeug.wrappers import Response
from werkzeug.wsgi import ClosingIterator

from webapp.browser_state.cookies import CSRF_COOKIE, apply_cookies, cookie_name
from webapp.browser_state.flask_session import CookieSessionInterface
from webapp.core import hosts, proxies
from webapp.core.hooks import AuthHooks
from webapp.core.jsonsafe import JSONProvider
from webapp.settings import Settings, install, load_settings
from webapp.settings.dev_server import dev_server
from webapp.storage import database, sql_counts, transactions
from webapp.storage.db import db
from webapp.telemetry import logs
from webapp.web import error_answers, health
from webapp.web.extensions import csrf, login_manager

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS_DIR = PROJECT_ROOT / "migrations"


class WholeBodyResponse(flask.Response):
    """Flask's response, handing a body it holds in memory to the server as a one-item list.

    Werkzeug hands every body over as an iterator, which granian then reads from one of its
    own threads, taking the GIL for each item and again to close it; on a worker whose
    threads are busy each of those takes its turn at the GIL. A list is sent in one call
    (under session reads the iteration and close took 30% of the workers' GIL time, the one
    call 16%: bench/RESULTS.md). A streamed body (a generator, a file) is handed over as
    it is.
    """

    def get_app_iter(self, environ: WSGIEnvironment) -> Iterable[bytes]:
        body: Iterable[bytes] = super().get_app_iter(environ)
        if not (self.is_sequence and isinstance(body, ClosingIterator)):
            return body  # a stream
        try:
            return [b"".join(body)]  # nothing for HEAD, 204 and 304, as Werkzeug sends
        finally:
            body.close()  # what the server would have called once the answer was sent


class App(Flask):
    """Flask, with ``WholeBodyResponse`` for its answers, asking once per function whether
    it must be run as a coroutine.

    Flask asks before every call of a view or request hook (``inspect`` work, ten times per
    request here), and the answer never changes for a function.
    """

    response_class = WholeBodyResponse

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        synced: dict[Callable[..., Any], Callable[..., Any]] = self.__dict__.setdefault(
            "_synced", {}
        )
        runnable = synced.get(func)
        if runnable is None:
            runnable = synced[func] = super().ensure_sync(func)
        return runnable


def create_app(
    config: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    hooks: AuthHooks | None = None,
    migrations: bool = True,
) -> Flask:
    """Create the application.

    Settings come from ``environ`` (default: the process environment), the TOML file it
    names, then ``config`` (overrides, as setting names: ``{"AUTH_SECRET": …}``). A bad
    setting raises ``settings.ConfigError`` naming it. ``migrations=False`` leaves out
    Flask-Migrate and the ``flask db`` commands: a WSGI server needs neither, and Alembic
    would add about 9 MB to every worker (webapp/wsgi.py, which production servers load,
    builds it that way).
    Loaded by ``flask run`` in development without AUTH_URL, the site is at the host and
    port it serves (``devserver.dev_server``).
    """
    app = App(__name__, instance_relative_config=True)
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    conf = load_settings(environ, config, instance_path=app.instance_path, served=dev_server())
    install(app, conf)
    app.extensions["webapp.hooks"] = hooks or AuthHooks()
    _configure_flask(app, conf)
    app.session_interface = CookieSessionInterface()
    app.json = JSONProvider(app)
    app.config["TESTING"] = bool((config or {}).get("TESTING", False))

    logs.init_app(app)
    database.init_app(app)
    transactions.init_app(app)
    if conf.sql_count_headers:
        sql_counts.init_app(app, conf)
    if migrations:
        from flask_migrate import Migrate

        Migrate(app, db, directory=str(MIGRATIONS_DIR))
    csrf.init_app(app)
    _init_login(app)

    from webapp import i18n, ui, web
    from webapp.cli import auth_cli

    web.init_app(app, conf)
    ui.init_app(app, conf)
    i18n.init_app(app, conf)
    app.cli.add_command(auth_cli)
    app.after_request(apply_cookies)

    @app.context_processor
    def _brand() -> dict[str, Any]:
        return {"brand": conf.brand, "auth_base": conf.base_path}

    # Outermost first: the request's id, the trusted proxies' headers, then the host check,
    # then Flask. A foreign host is refused before anything else runs.
    app.wsgi_app = logs.wrap(  # type: ignore[method-assign]
        proxies.wrap(hosts.wrap(app, conf, error_answers.expects_json), conf.trusted_proxies),
        quiet_paths=health.PATHS,
    )
    log.info(
        "serving %s; trusting %s; also answering to %s",
        conf.auth_url,
        conf.trusted_proxies.describe(),
        ", ".join(conf.allowed_hosts) or "no other host",
    )

    if migrations and conf.is_development and not app.config.get("TESTING"):
        _migrate_development_database(app)
    return app


def _configure_flask(app: Flask, conf: Settings) -> None:
    app.config.update(
        SECRET_KEY=conf.derive_key("flask-session").hex(),
        SECRET_KEY_FALLBACKS=[k.hex() for k in conf.derive_keys("flask-session")[1:]],
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
        PREFERRED_URL_SCHEME="https" if conf.is_https else "http",
        WTF_CSRF_FIELD_NAME="csrfToken",
        WTF_CSRF_HEADERS=["X-CSRFToken", "X-CSRF-Token"],
        # The token lives as long as the CSRF cookie (the browser session), as in Auth.js:
        # a sign-in page left open over lunch still works.
        WTF_CSRF_TIME_LIMIT=None,
        # Its Referer check compares with the request's Host; ours (extensions.CSRFProtect)
        # compares Origin or Referer with AUTH_URL.
        WTF_CSRF_SSL_STRICT=False,
        MAX_CONTENT_LENGTH=64 * 1024,
        MAX_FORM_MEMORY_SIZE=64 * 1024,
    )


def _init_login(app: Flask) -> None:
    from webapp.core import urls
    from webapp.sessions.store import AuthUser, current_session
    from webapp.web.bearer import bearer_identity

    login_manager.init_app(app)
    # Sessions live in the database; Flask-Login must not keep its own state in the cookie.
    login_manager.session_protection = None

    @login_manager.request_loader
    def _load_user(_request: Any) -> AuthUser | None:
        session = current_session()
        if session is not None:
            return session.user
        # An API caller's provider access token, where a provider accepts them.
        identity = bearer_identity()
        return identity.user if identity else None

    @login_manager.unauthorized_handler
    def _unauthorized() -> Response:
        here = urls.origin() + request.full_path.rstrip("?")
        return redirect(urls.auth_url("signin", error="SessionRequired", callbackUrl=here))


def _migrate_development_database(app: Flask) -> None:
    """Bring the development database up to date, so a fresh clone just runs."""
    from flask_migrate import upgrade

    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
