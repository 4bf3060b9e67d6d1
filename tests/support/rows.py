"""Reading what the app wrote: ``row_count`` counts a model's rows through the app,
``read_rows`` reads with SQL on a connection of its own, ``hearing_of_new_rows`` listens
to the signals of new users and accounts, ``add_passkey`` stores a passkey row; ``NewSession``
is what the ``session_factory`` fixture (tests/conftest.py) returns."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Flask

from webapp.core.hooks import account_linked, user_created
from webapp.storage.db import db
from webapp.storage.models import Account, Authenticator, User


def row_count(app: Flask, model: Any, **filters: Any) -> int:
    """Count ``model``'s rows, those matching ``filters`` (column=value) if given."""
    with app.app_context():
        query = sa.select(sa.func.count()).select_from(model).filter_by(**filters)
        return int(db.session.execute(query).scalar_one())


def add_passkey(app: Flask, user_id: int, name: str = "Phone", *, synced: bool = True) -> int:
    """Store a passkey row for ``user_id`` (a way in for the account rules; its key signs
    nothing), synced across devices or bound to one; return its id."""
    with app.app_context():
        passkey = Authenticator(
            user_id=user_id,
            credential_id=f"cred-{user_id}-{name}",
            public_key="pQECAyYgASFYIA",
            sign_count=0,
            backed_up=synced,
            device_type="multi_device" if synced else "single_device",
            name=name,
        )
        db.session.add(passkey)
        db.session.commit()
        return int(passkey.id)


def read_rows(database_url: str, sql: str, **params: Any) -> list[Any]:
    """Rows read from the database directly, on a connection of their own."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params))
    finally:
        engine.dispose()


@contextmanager
def hearing_of_new_rows(app: Flask) -> Iterator[list[tuple[str, int]]]:
    """Listen to ``user_created`` and ``account_linked`` meanwhile: each as heard, with how
    many rows of its kind were committed then (``row_count`` reads in a session and on a
    connection of its own)."""
    heard: list[tuple[str, int]] = []

    def on_user_created(_sender: Any, **_: Any) -> None:
        heard.append(("user_created", row_count(app, User)))

    def on_account_linked(_sender: Any, **_: Any) -> None:
        heard.append(("account_linked", row_count(app, Account)))

    with (
        user_created.connected_to(on_user_created),
        account_linked.connected_to(on_account_linked),
    ):
        yield heard


@dataclass(frozen=True)
class NewSession:
    """A session row made by ``session_factory``; ``token`` is its working cookie value."""

    id: int
    user_id: int
    token: str
    token_hash: str
