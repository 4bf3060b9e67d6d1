"""One rule for transactions: flows never commit; the request's writes commit when it ends.

A signal is sent only once what it tells of is committed (a receiver on another connection
sees it), and never when it is discarded (a sign-in the hook refuses, a savepoint lost to a
race); a failed flow leaves nothing; only the request boundary (webapp/storage/transactions.py),
the error handler of a refusal whose writes must stand, and the maintenance commands
commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp import create_app
from webapp.core.hooks import AuthHooks, signed_in, signed_out
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.config import base_config
from .support.rows import hearing_of_new_rows, row_count
from .support.signin import DEMO_EMAIL, demo_sign_in

ROOT = Path(__file__).resolve().parent.parent / "webapp"
#: Where a commit may be written: the boundary itself, the handler of a refusal whose
#: writes must stand, the maintenance commands' batches (their own boundary), and
#: ``flask auth migrate`` on its own locked connection, which Alembic must find outside a
#: transaction (schema_upgrade.py).
COMMITTERS = {
    "storage/transactions.py",
    "web/error_answers.py",
    "cli.py",
    "storage/database.py",
    "storage/schema_upgrade.py",
    "audit/throttles.py",
    "storage/resealing.py",
}


def test_only_the_boundary_commits() -> None:
    found = {
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if re.search(r"\.commit\(\)", path.read_text())
    }
    assert found <= COMMITTERS, found - COMMITTERS
    database = (ROOT / "storage/database.py").read_text()
    # There, only the batched delete of the cleanup (expired sessions, old audit events).
    assert database.count(".commit()") == 1 and "def delete_in_batches" in database
    # There, only the batched re-sealing (a refresh is its own ``session.begin()`` unit).
    resealing = (ROOT / "storage/resealing.py").read_text()
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


def test_user_created_and_account_linked_tell_of_committed_rows(app: Flask) -> None:
    client = app.test_client()
    with hearing_of_new_rows(app) as heard:
        demo_sign_in(client)
        demo_sign_in(client)  # the same identity again: nothing new to tell of
    assert heard == [("user_created", 1), ("account_linked", 1)]


def _broken_hook(**_: Any) -> bool:
    raise RuntimeError("the application's hook is broken")


@pytest.mark.parametrize(
    ("hook", "answer"),
    [
        (lambda **_: False, (302, "http://localhost/auth/error?error=AccessDenied")),
        (
            lambda **_: "http://localhost/pending-approval",
            (302, "http://localhost/pending-approval"),
        ),
        (_broken_hook, (500, None)),
    ],
    ids=["denied", "sent-elsewhere", "hook-fails"],
)
def test_a_signin_the_hook_stops_tells_of_no_user_or_account(
    make_app: Callable[..., Flask],
    hook: Callable[..., bool | str],
    answer: tuple[int, str | None],
) -> None:
    app = make_app(hooks=AuthHooks(signin=hook))
    with hearing_of_new_rows(app) as heard:
        refused = demo_sign_in(app.test_client())
    assert (refused.status_code, refused.headers.get("Location")) == answer
    assert heard == []
    assert (row_count(app, User), row_count(app, Account)) == (0, 0)


@pytest.fixture
def pg_app(postgres_url: str) -> Iterator[Flask]:
    app = create_app(base_config(postgres_url), environ={})
    yield app
    with app.app_context():
        db.engine.dispose()


def test_a_user_lost_to_a_concurrent_first_signin_is_not_told_of(
    pg_app: Flask,
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
) -> None:
    # Two first sign-ins of one identity at once: this one inserts its user, the other
    # commits its user and account meanwhile, so this one's account INSERT fails and its
    # savepoint (user included) is rolled back; it signs in the other's user instead.
    # PostgreSQL only: SQLite lets no second writer in while the first holds its lock.
    winner: list[int] = []

    def other_signin_commits(*_: Any) -> None:
        user_id = user_factory(pg_app)
        account_factory(
            pg_app, user_id, provider="demo", type="credentials", provider_account_id=DEMO_EMAIL
        )
        winner.append(user_id)

    # once: the other sign-in's own INSERT of its user comes through here too.
    sa.event.listen(User, "after_insert", other_signin_commits, once=True)
    try:
        with hearing_of_new_rows(pg_app) as heard:
            answer = demo_sign_in(pg_app.test_client())
    finally:
        sa.event.remove(User, "after_insert", other_signin_commits)
    assert answer.headers["Location"] == "http://localhost/"
    assert heard == []
    with pg_app.app_context():
        assert db.session.scalars(sa.select(User.id)).all() == winner
        assert db.session.scalars(sa.select(Session.user_id)).all() == winner
