"""What the interop tests read and change of the app's rows, through the app."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from flask import Flask

from webapp.storage.db import db
from webapp.storage.models import Account


def rows(app: Flask, model: Any) -> list[Any]:
    """Every row of ``model``, every column loaded, detached."""
    with app.app_context():
        query = sa.select(model).order_by(model.id).options(sa.orm.undefer("*"))
        found = list(db.session.scalars(query))
        db.session.expunge_all()
        return found


def account_of(app: Flask, provider: str) -> Any:
    """The account row of ``provider`` (Any: its token columns are set by a sign-in)."""
    with app.app_context():
        account = db.session.execute(
            sa.select(Account).where(Account.provider == provider)
        ).scalar_one()
        db.session.expunge(account)
        return account


def expire_in(app: Flask, provider: str, seconds: float) -> None:
    """Make the stored access token expire ``seconds`` from now (due within the margin)."""
    with app.app_context():
        db.session.execute(
            sa.update(Account)
            .where(Account.provider == provider)
            .values(expires_at=datetime.now(UTC) + timedelta(seconds=seconds))
        )
        db.session.commit()
