"""E-mail sign-in: one-time code, browser binding, attempts and callback URL on tokens.

Revision ID: 0002_email_sign_in
Revises: 0001_initial
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_email_sign_in"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

TABLE_COMMENT = "Single-use e-mail sign-ins; only keyed hashes (HMAC-SHA-256, AUTH_SECRET)."
OLD_TABLE_COMMENT = "Single-use sign-in tokens; token_hash is HMAC-SHA-256 keyed from AUTH_SECRET."


def upgrade() -> None:
    # batch_alter_table rebuilds the table on SQLite (no ALTER for most things there) and is
    # plain ALTER TABLE on PostgreSQL.
    with op.batch_alter_table("verification_tokens") as batch:
        batch.add_column(sa.Column(
            "code_hash", sa.String(64),
            comment="Keyed hash of the one-time code sent with the link",
        ))
        batch.add_column(sa.Column(
            "browser_hash", sa.String(64),
            comment="Keyed hash of the requesting browser's cookie (code works there only)",
        ))
        batch.add_column(sa.Column(
            "attempts", sa.Integer, nullable=False, server_default="0",
            comment="Wrong one-time codes tried so far",
        ))
        batch.add_column(sa.Column(
            "callback_url", sa.Text,
            comment="Where to go after sign-in (already checked to be on this site)",
        ))
        batch.create_index("ix_verification_tokens_browser_hash", ["browser_hash"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"COMMENT ON TABLE verification_tokens IS '{TABLE_COMMENT}'")


def downgrade() -> None:
    with op.batch_alter_table("verification_tokens") as batch:
        batch.drop_index("ix_verification_tokens_browser_hash")
        batch.drop_column("callback_url")
        batch.drop_column("attempts")
        batch.drop_column("browser_hash")
        batch.drop_column("code_hash")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"COMMENT ON TABLE verification_tokens IS '{OLD_TABLE_COMMENT}'")
