"""Provider tokens sealed at rest: accounts.access_token, refresh_token and id_token.

Revision ID: 0004_sealed_provider_tokens
Revises: 0003_verified_email_identity
Create Date: 2026-11-23

Upgrade seals every stored token with AES-GCM under AUTH_SECRET (``webapp.core.sealing``, the
format the app reads); downgrade opens them again (under AUTH_SECRET or one of
AUTH_PREVIOUS_SECRETS) and refuses, changing nothing, if one does not open. Both work in
batches of ``BATCH`` rows by id. A value that already opens is left alone, so an upgrade
interrupted half-way can simply be run again. The columns stay TEXT; on PostgreSQL their
comments say what they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import sqlalchemy as sa
from alembic import op

from webapp.core import sealing

revision = "0004_sealed_provider_tokens"
down_revision = "0003_verified_email_identity"
branch_labels = None
depends_on = None

COLUMNS = ("access_token", "refresh_token", "id_token")
SEALED_COMMENT = "Sealed provider token (AES-GCM under AUTH_SECRET); NULL when none"
TABLE_COMMENT = "Identities at sign-in providers, linked to users; provider tokens sealed."
OLD_TABLE_COMMENT = "Identities at sign-in providers, linked to users; holds provider tokens."
BATCH = 1000

accounts = sa.table("accounts", sa.column("id", sa.BigInteger), *(sa.column(c) for c in COLUMNS))


def _rows() -> Iterator[sa.Row[tuple[int, str | None, str | None, str | None]]]:
    """Every account holding a token, in batches by id."""
    bind = op.get_bind()
    holds_token = sa.or_(*(accounts.c[c].is_not(None) for c in COLUMNS))
    last = 0
    while True:
        batch = bind.execute(
            sa.select(accounts.c.id, *(accounts.c[c] for c in COLUMNS))
            .where(holds_token, accounts.c.id > last)
            .order_by(accounts.c.id)
            .limit(BATCH)
        ).all()
        yield from batch
        if len(batch) < BATCH:
            return
        last = batch[-1].id


def _is_sealed(value: str, context: str) -> bool:
    try:
        sealing.open_sealed(value, context=context)
    except sealing.Unreadable:
        return False
    return True


def _rewrite(change: Callable[[str, str], str | None]) -> None:
    """Set each token to ``change(value, context)`` where that gives a new value."""
    bind = op.get_bind()
    for row in _rows():
        values = {}
        for column in COLUMNS:
            value = getattr(row, column)
            if value is not None:
                new = change(value, f"accounts.{column}")
                if new is not None:
                    values[column] = new
        if values:
            bind.execute(accounts.update().where(accounts.c.id == row.id).values(**values))


def _comments(column_comment: str | None, table_comment: str, old_table: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite keeps no comments
    for column in COLUMNS:
        op.alter_column("accounts", column, existing_type=sa.Text, comment=column_comment)
    op.create_table_comment("accounts", table_comment, existing_comment=old_table)


def upgrade() -> None:
    _rewrite(lambda v, ctx: None if _is_sealed(v, ctx) else sealing.seal(v, context=ctx))
    _comments(SEALED_COMMENT, TABLE_COMMENT, OLD_TABLE_COMMENT)


def downgrade() -> None:
    def unseal(value: str, context: str) -> str:
        try:
            return sealing.open_sealed(value, context=context)
        except sealing.Unreadable as exc:
            # The transaction rolls back: nothing is half unsealed.
            raise RuntimeError(
                f"cannot downgrade: a value in {context} does not open ({exc}); configure the "
                "secret it was sealed under in AUTH_PREVIOUS_SECRETS"
            ) from None

    _rewrite(unseal)
    _comments(None, OLD_TABLE_COMMENT, TABLE_COMMENT)
