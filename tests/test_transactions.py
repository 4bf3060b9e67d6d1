"""One rule for transactions: flows never commit; the request's writes commit when it ends.

A signal is sent only once what it tells of is committed (a receiver on another connection
sees it); a failed flow leaves nothing; only the request boundary (webapp/transactions.py),
the error handler of a refusal whose writes must stand, and the maintenance commands
commit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask

from webapp.auth.hooks import signed_in, signed_out
from webapp.extensions import db
from webapp.models import Session

from .helpers import demo_sign_in

ROOT = Path(__file__).resolve().parent.parent / "webapp"
#: Where a commit may be written: the boundary itself, the handler of a refusal whose
#: writes must stand, the maintenance commands' batches (their own boundary), and
#: ``flask auth migrate`` on its own locked connection, which Alembic must find outside a
#: transaction (upgrade.py).
COMMITTERS = {
    "transactions.py",
    "errors.py",
    "cli.py",
    "database.py",
    "upgrade.py",
    "auth/ratelimit.py",
    "auth/resealing.py",
}


def test_only_the_boundary_commits() -> None:
    found = {
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if re.search(r"\.commit\(\)", path.read_text())
    }
    assert found <= COMMITTERS, found - COMMITTERS
    database = (ROOT / "database.py").read_text()
    # There, only the batched delete of the cleanup (expired sessions, old audit events).
    assert database.count(".commit()") == 1 and "def delete_in_batches" in database
    # There, only the batched re-sealing (a refresh is its own ``session.begin()`` unit).
    resealing = (ROOT / "auth/resealing.py").read_text()
    assert resealing.count(".commit()") == 1 and "def reseal" in resealing


def _committed_sessions(app: Flask) -> int:
    # A connection of its own: it sees only what is committed.
    with app.app_context(), db.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(Session)).scalar_one())


def test_signals_tell_of_committed_rows(app: Flask) -> None:
    seen: list[tuple[str, int]] = []

    def on_signed_in(_sender: Any, **_: Any) -> None:
        seen.append(("in", _committed_sessions(app)))

    def on_signed_out(_sender: Any, **_: Any) -> None:
        seen.append(("out", _committed_sessions(app)))

    signed_in.connect(on_signed_in)
    signed_out.connect(on_signed_out)
    try:
        client = app.test_client()
        demo_sign_in(client)
        token = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
        client.post("/auth/signout", data={"csrfToken": token})
    finally:
        signed_in.disconnect(on_signed_in)
        signed_out.disconnect(on_signed_out)
    assert seen == [("in", 1), ("out", 0)]
