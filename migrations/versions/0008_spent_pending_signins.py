"""Pending sign-ins pass once: ``spent_challenges`` holds their spent ids too.

Revision ID: 0008_spent_pending_signins
Revises: 0007_audit_trail
Create Date: 2026-11-28

A sign-in waiting for its second factor carries a random id in its sealed cookie; the
request that passes it writes the id's SHA-256 to ``spent_challenges``, beside the spent
passkey challenges (webapp/second_factor/pending_signin.py). The rows are alike (a one-time
value's hash, kept until its cookie would have expired), so the table is shared and only
its description changes (PostgreSQL; SQLite keeps no comments).
"""

from __future__ import annotations

from alembic import op

revision = "0008_spent_pending_signins"
down_revision = "0007_audit_trail"
branch_labels = None
depends_on = None

TABLE_COMMENT = (
    "One-time values already used (SHA-256): passkey challenges and pending sign-ins; "
    "replays are refused."
)
OLD_TABLE_COMMENT = "Passkey challenges already used (SHA-256); replays are refused."


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_table_comment(
            "spent_challenges", TABLE_COMMENT, existing_comment=OLD_TABLE_COMMENT
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_table_comment(
            "spent_challenges", OLD_TABLE_COMMENT, existing_comment=TABLE_COMMENT
        )
