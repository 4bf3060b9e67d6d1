"""Health checks for load balancers and orchestrators: ``GET /healthz`` and ``GET /readyz``.

``/healthz`` says the process answers, and touches nothing else (restart it if this
fails). ``/readyz`` says the instance can serve: one ``SELECT 1`` on a connection of the
app's pool, answered within ``READY_TIMEOUT``, and a schema migrated to this release's
revision (a newer one, migrated ahead in a rolling deploy, serves too); otherwise 503, and
a balancer sends the requests elsewhere. Both live outside the auth path, are never
cached, and go to the access log at DEBUG only, since a balancer asks every second
(``observability.wrap``).

The database check runs on one thread of its own per process and a request waits for it
``READY_TIMEOUT`` at most: a database that hangs (a pooler still connecting, a network
dropping packets) gets a 503 in time instead of holding server threads, and checks that
arrive while one is under way wait for that one instead of starting more.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from flask import Blueprint, Flask, current_app, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.wrappers import Response

from webapp.storage.database import autocommit_connection
from webapp.storage.schema_upgrade import schema_behind
from webapp.telemetry import logsafe
from webapp.web.error_answers import RETRY_AFTER

log = logging.getLogger(__name__)

#: The health routes, which the access log writes at DEBUG only.
PATHS = frozenset({"/healthz", "/readyz"})
#: Seconds ``/readyz`` waits for the database's answer: below a balancer's check timeout
#: (deploy/haproxy.cfg: 3 s), far above a ``SELECT 1`` on a loaded machine.
READY_TIMEOUT = 2.0
#: Where the app keeps its ``Readiness`` (``app.extensions``).
EXTENSION_KEY = "webapp.readiness"
#: Set in ``app.extensions`` once the schema was found at this release's revision.
SCHEMA_READY_KEY = "webapp.schema_ready"

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    return _answer("ok", 200)


@bp.get("/readyz")
def readyz() -> Response:
    readiness: Readiness = current_app.extensions[EXTENSION_KEY]
    if readiness.check(current_app._get_current_object()):  # type: ignore[attr-defined]
        return _answer("ok", 200)
    response = _answer("unavailable", 503)
    response.headers["Retry-After"] = str(RETRY_AFTER)
    return response


def _answer(status: str, code: int) -> Response:
    response = jsonify({"status": status})
    response.status_code = code
    response.headers["Cache-Control"] = "no-store"
    return response


class Readiness:
    """One process's database check: at most one under way, its result logged when it
    changes (not on every check)."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="readyz")
        self._lock = threading.Lock()
        self._pending: Future[str | None] | None = None
        self._ready: bool | None = None

    def check(self, app: Flask) -> bool:
        """Whether the database answers ``SELECT 1`` within ``READY_TIMEOUT``, with its
        schema at this release's revision (or a newer one)."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._executor.submit(_check_database, app)
            pending = self._pending
        problem = None
        try:
            problem = pending.result(timeout=READY_TIMEOUT)
        except TimeoutError:
            problem = f"the database did not answer within {READY_TIMEOUT:g}s"
        except SQLAlchemyError as exc:
            # The driver's message spans lines and may name the server.
            problem = "the database did not answer: " + logsafe.encode(
                getattr(exc, "orig", None) or exc
            )
        self._note(problem)
        return problem is None

    def _note(self, problem: str | None) -> None:
        ready = problem is None
        if ready == self._ready:
            return
        if not ready:
            log.warning("not ready: %s", problem)
        elif self._ready is False:
            log.info("ready: the database answers, its schema at this release's revision")
        self._ready = ready


def _check_database(app: Flask) -> str | None:
    """``SELECT 1``, then, until it has been found at this release's revision once (a
    schema does not go back), the schema's: why the instance cannot serve, or None."""
    with app.app_context(), autocommit_connection() as conn:
        conn.execute(text("SELECT 1"))
        if app.extensions.get(SCHEMA_READY_KEY):
            return None
        behind = schema_behind(conn)
    app.extensions[SCHEMA_READY_KEY] = behind is None
    return behind


def init_app(app: Flask) -> None:
    """Register the routes and the process's readiness check."""
    app.extensions[EXTENSION_KEY] = Readiness()
    app.register_blueprint(bp)
