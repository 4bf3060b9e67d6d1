"""SAML assertions are accepted once: ``spent_saml_assertions``.

Revision ID: 0010_spent_saml_assertions
Revises: 0009_email_address_changes
Create Date: 2026-11-29

A SAML provider's assertion consumer writes each accepted assertion's ID (its SHA-256, per
provider) with the end of its bearer confirmation; a second use of the same assertion, on
any worker or instance, is refused. ``flask auth cleanup`` deletes the expired rows.
Downgrade drops the table (an assertion replayed then is still refused by its
InResponseTo, whose browser cookie the first use spent).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.storage.models import UTCDateTime

revision = "0010_spent_saml_assertions"
down_revision = "0009_email_address_changes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spent_saml_assertions",
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("assertion_hash", sa.String(64), nullable=False,
                  comment="Hex SHA-256 of the assertion's ID"),
        sa.Column("expires", UTCDateTime, nullable=False,
                  comment="After this the assertion is refused by its age alone"),
        sa.PrimaryKeyConstraint("provider", "assertion_hash", name="pk_spent_saml_assertions"),
        comment="SAML assertions (provider, SHA-256 of the ID) accepted; replays are refused.",
    )
    op.create_index("ix_spent_saml_assertions_expires", "spent_saml_assertions", ["expires"])


def downgrade() -> None:
    op.drop_index("ix_spent_saml_assertions_expires", table_name="spent_saml_assertions")
    op.drop_table("spent_saml_assertions")
