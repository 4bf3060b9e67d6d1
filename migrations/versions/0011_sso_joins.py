"""Joins by e-mail domain: ``sso_joins``.

Revision ID: 0011_sso_joins
Revises: 0010_spent_saml_assertions
Create Date: 2026-11-29

A provider declared for e-mail domains (``domains``) joins an existing user by their
verified address the first time they sign in through it; each join is one row, at most one
per user and provider, listed and undone by ``flask auth sso``. An undone join keeps its
row (``undone_at``), so it is not made again by itself. Downgrade drops the table (the
accounts the joins made stay).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.storage.models import BigIntPK, UTCDateTime

revision = "0011_sso_joins"
down_revision = "0010_spent_saml_assertions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sso_joins",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False, comment="Provider id"),
        sa.Column("email", sa.String(320), nullable=False,
                  comment="The verified address the join went by"),
        sa.Column("account_id", sa.BigInteger,
                  sa.ForeignKey("accounts.id", ondelete="SET NULL"),
                  comment="The account the join made (NULL once removed)"),
        sa.Column("joined_at", UTCDateTime, nullable=False),
        sa.Column("undone_at", UTCDateTime,
                  comment="When the operator undid it (flask auth sso undo)"),
        sa.UniqueConstraint("user_id", "provider", name="uq_sso_joins_user_provider"),
        comment="Existing users joined to a provider by their verified e-mail domain.",
    )


def downgrade() -> None:
    op.drop_table("sso_joins")
