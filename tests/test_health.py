"""``GET /healthz`` and ``GET /readyz`` (webapp/web/health.py), for load balancers: cheap, quiet
in the access log, and bounded in time whatever the database does.

tests/test_cluster.py shows HAProxy acting on them."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp import create_app
from webapp.storage.db import db
from webapp.storage.schema_upgrade import VERSION_TABLE, code_revisions
from webapp.web.error_answers import RETRY_AFTER
from webapp.web.health import READY_TIMEOUT

from .support.config import base_config
from .support.databases import migrate_database
from .support.faults import syn_dropping_port

#: A request's own work on a shared 2-core machine, beyond the waits the app allows itself.
SLACK = 1.5
#: Port 1 on loopback: nothing listens, so connections are refused at once.
REFUSED = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"


def _app_on(database_url: str) -> Flask:
    return create_app(base_config(database_url), environ={})


def test_healthz_answers_without_the_database(app, client, count_sql):
    with count_sql() as sql:
        r = client.get("/healthz")
    assert (r.status_code, r.json) == (200, {"status": "ok"})
    assert r.headers["Cache-Control"] == "no-store"
    assert sql.statements == []
    assert _app_on(REFUSED).test_client().get("/healthz").status_code == 200


def test_readyz_is_one_trivial_statement(app, client, count_sql):
    """Once the schema has been found at this release's revision (the first check)."""
    assert client.get("/readyz").status_code == 200
    with count_sql() as sql:
        r = client.get("/readyz")
    assert (r.status_code, r.json) == (200, {"status": "ok"})
    assert r.headers["Cache-Control"] == "no-store"
    assert sql.statements == ["SELECT 1"]
    assert client.head("/readyz").status_code == 200


def test_readyz_with_the_database_unreachable_is_503_and_says_so_once(caplog):
    client = _app_on(REFUSED).test_client()
    with caplog.at_level(logging.INFO, logger="webapp.web.health"):
        answers = [client.get("/readyz") for _ in range(3)]
    for r in answers:
        assert (r.status_code, r.json) == (503, {"status": "unavailable"})
        assert r.headers["Retry-After"] == str(RETRY_AFTER)
    [warning] = [rec for rec in caplog.records if rec.name == "webapp.web.health"]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("not ready: the database did not answer: ")
    assert "\n" not in warning.getMessage()


def test_readyz_with_a_hanging_database_answers_in_time_and_checks_do_not_pile_up():
    """Connection attempts that hang (the packets are dropped) last the driver's connect
    timeout (5 s); /readyz says 503 after READY_TIMEOUT, and checks arriving meanwhile
    wait for the one under way instead of each holding a thread on its own attempt."""
    before = set(threading.enumerate())
    with syn_dropping_port() as port:
        client = _app_on(f"postgresql+psycopg://postgres@127.0.0.1:{port}/x").test_client()

        def check(_: int) -> tuple[int, float]:
            start = time.monotonic()
            status = client.get("/readyz").status_code
            return status, time.monotonic() - start

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(check, range(6)))
        checking = [t for t in set(threading.enumerate()) - before if t.name.startswith("readyz")]
    assert [status for status, _ in answers] == [503] * 6
    assert all(READY_TIMEOUT * 0.9 <= took <= READY_TIMEOUT + SLACK for _, took in answers)
    assert len(checking) == 1


@pytest.mark.parametrize("level,logged", [(logging.INFO, ["/auth/csrf"]), (logging.DEBUG, None)])
def test_the_access_log_writes_health_checks_at_debug_only(app, caplog, level, logged):
    client = app.test_client()
    with caplog.at_level(level, logger="webapp.access"):
        for path in ("/healthz", "/readyz", "/auth/csrf"):
            client.get(path).close()  # the access line is written when the answer closes
    paths = [rec.getMessage().split()[2] for rec in caplog.records if rec.name == "webapp.access"]
    assert paths == (logged or ["/healthz", "/readyz", "/auth/csrf"])


def _readyz(database_url: str, caplog: pytest.LogCaptureFixture) -> tuple[int, list[str]]:
    """Two checks of a new app on ``database_url``: the status, and what was logged."""
    app = _app_on(database_url)
    client = app.test_client()
    with caplog.at_level(logging.INFO, logger="webapp.web.health"):
        statuses = {client.get("/readyz").status_code for _ in range(2)}
    with app.app_context():
        db.engine.dispose()
    assert len(statuses) == 1
    said = [r.getMessage() for r in caplog.records if r.name == "webapp.web.health"]
    return statuses.pop(), said


def test_readyz_on_a_schema_never_migrated_is_503_naming_the_command(
    empty_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Otherwise the balancer would send every request to an instance that answers each
    one with a cookie 503."""
    status, said = _readyz(empty_database, caplog)
    assert status == 503
    [head] = code_revisions()[1]
    assert said == [
        f"not ready: the schema is at nothing (never migrated), this release needs {head}:"
        " run flask auth migrate"
    ]


def test_readyz_on_a_schema_one_migration_behind_is_503_until_migrated(
    empty_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    migrate_database(empty_database, "0007_audit_trail")
    status, said = _readyz(empty_database, caplog)
    assert status == 503 and "the schema is at 0007_audit_trail" in said[0]
    migrate_database(empty_database)
    caplog.clear()
    assert _readyz(empty_database, caplog) == (200, [])


def test_readyz_on_a_schema_a_newer_release_migrated_is_ready(
    empty_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rolling deploy migrates first: the instances still on this release keep serving."""
    migrate_database(empty_database)
    engine = sa.create_engine(empty_database, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0009_from_the_future'"))
    engine.dispose()
    assert _readyz(empty_database, caplog) == (200, [])
