"""Per-request SQL counts in response headers, for the benchmark (``SQL_COUNT_HEADERS``).

Off in normal operation. When on, every response carries ``X-SQL-Statements`` (statements
the request sent through the engine) and ``X-SQL-Writes`` (those that were INSERT, UPDATE
or DELETE), so a load tool can check "one statement per session read, no writes" under
real concurrency. It counts what SQLAlchemy executes and what ``database.HotSelect`` runs
on the driver directly; with ``DB_POOL_PRE_PING`` on, the
ping on each connection checkout is counted too, as the round trip it is.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, g, has_request_context
from sqlalchemy import Engine, event

from webapp.settings import Settings
from webapp.storage.database import driver_statement
from webapp.storage.db import db

STATEMENTS_HEADER = "X-SQL-Statements"
WRITES_HEADER = "X-SQL-Writes"
_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE")


def init_app(app: Flask, conf: Settings) -> None:
    """Count this app's statements per request and report them in response headers."""
    with app.app_context():
        engine: Engine = db.engine
    event.listen(engine, "before_cursor_execute", _count_statement)
    driver_statement.connect(_count_driver_statement)
    if conf.db_pool_pre_ping:
        # The ping bypasses cursor events; count it at checkout, where it happens.
        event.listen(engine.pool, "checkout", _count_ping)
    app.after_request(_add_headers)


def _count(statement: str) -> None:
    if not has_request_context():
        return
    g.sql_statements = g.get("sql_statements", 0) + 1
    if statement.lstrip()[:6].upper() in _WRITE_VERBS:
        g.sql_writes = g.get("sql_writes", 0) + 1


def _count_statement(
    _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    _count(statement)


def _count_driver_statement(_sender: Any, *, statement: str) -> None:
    _count(statement)


def _count_ping(*_args: Any) -> None:
    _count("SELECT 1")


def _add_headers(response: Response) -> Response:
    response.headers[STATEMENTS_HEADER] = str(g.get("sql_statements", 0))
    response.headers[WRITES_HEADER] = str(g.get("sql_writes", 0))
    return response
