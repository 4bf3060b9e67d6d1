"""A Flask web application with a delegated sign-in facility in the style of Auth.js."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import flask
from flask import Flask
from werkzeug.wsgi import ClosingIterator

from webapp.auth.extension import Auth
from webapp.core.hooks import AuthHooks
from webapp.settings import current_settings, process_environment
from webapp.storage.db import db
from webapp.storage.schema_upgrade import migrations_dir
from webapp.web import init_home_page

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

MIGRATIONS_DIR = migrations_dir()


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
    """Create the standalone application: the sign-in facility (``webapp.auth.Auth``), our
    home page, and our error pages for every request.

    Settings come from ``environ`` (default: the process environment), the TOML file it
    names, then ``config`` (overrides, as setting names: ``{"AUTH_SECRET": …}``; Flask's
    own keys, ``TESTING``, go to ``app.config`` with them). A bad setting raises
    ``settings.ConfigError`` naming it. ``migrations=False`` leaves out Flask-Migrate and
    the ``flask db`` commands: a WSGI server needs neither, and Alembic would add about
    9 MB to every worker (webapp/wsgi.py, which production servers load, builds it that
    way).
    Loaded by ``flask run`` in development without AUTH_URL, the site is at the host and
    port it serves (``devserver.dev_server``).
    """
    app = App(__name__, instance_relative_config=True)
    app.config.update(config or {})
    environment = process_environment() if environ is None else environ
    init_home_page(app)
    Auth(app, environ=environment, hooks=hooks, site_error_pages=True)
    if migrations:
        from flask_migrate import Migrate

        Migrate(app, db, directory=str(MIGRATIONS_DIR))
        with app.app_context():
            development = current_settings().is_development
        if development and not app.config["TESTING"]:
            _migrate_development_database(app)
    return app


def _migrate_development_database(app: Flask) -> None:
    """Bring the development database up to date, so a fresh clone just runs."""
    from flask_migrate import upgrade

    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
