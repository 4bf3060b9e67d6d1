"""Recording the SQL an app runs: ``counting_sql(app)`` (the ``count_sql`` fixture in
tests/conftest.py is it on the ``app`` fixture) yields a ``SqlCounter``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from flask import Flask

from webapp.storage.database import driver_statement
from webapp.storage.db import db


class SqlCounter:
    """Records the SQL statements an engine runs while active, and those run on the
    driver directly (database.HotSelect announces each one)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def driver_statement(self, _sender: Any, *, statement: str) -> None:
        self.statements.append(statement)

    @property
    def writes(self) -> list[str]:
        return [
            s
            for s in self.statements
            if s.lstrip().split()[0].upper() in {"INSERT", "UPDATE", "DELETE"}
        ]


@contextmanager
def counting_sql(app: Flask) -> Iterator[SqlCounter]:
    """Record every statement ``app``'s engine runs meanwhile."""
    counter = SqlCounter()
    with app.app_context():
        engine = db.engine
    sa.event.listen(engine, "before_cursor_execute", counter)
    driver_statement.connect(counter.driver_statement)
    try:
        yield counter
    finally:
        sa.event.remove(engine, "before_cursor_execute", counter)
        driver_statement.disconnect(counter.driver_statement)
