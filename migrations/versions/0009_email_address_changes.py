"""Changes of e-mail address: a pending one is a ``verification_tokens`` row of its user.

Revision ID: 0009_email_address_changes
Revises: 0008_spent_pending_signins
Create Date: 2026-11-29

A signed-in person who asks to change the address gets a single-use link at the new one
(webapp/flows/account/profile.py). It is kept as e-mail sign-in links are: only its keyed
hash, the new address as ``identifier``, an expiry; ``user_id`` names whose address it
replaces, one pending change per user (NULL for every sign-in, old and new). The row goes
with its user (ON DELETE CASCADE), and with the expired tokens (``flask auth cleanup``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_email_address_changes"
down_revision = "0008_spent_pending_signins"
branch_labels = None
depends_on = None

TOKENS_COMMENT = (
    "Single-use e-mail sign-ins and changes of address; only keyed hashes "
    "(HMAC-SHA-256, AUTH_SECRET)."
)
OLD_TABLE_COMMENT = "Single-use e-mail sign-ins; only keyed hashes (HMAC-SHA-256, AUTH_SECRET)."


def upgrade() -> None:
    # batch_alter_table rebuilds the table on SQLite (which cannot add a foreign key to a
    # table) and is plain ALTER TABLE on PostgreSQL.
    with op.batch_alter_table("verification_tokens") as batch:
        batch.add_column(sa.Column(
            "user_id", sa.BigInteger,
            sa.ForeignKey("users.id", name="fk_verification_tokens_user_id", ondelete="CASCADE"),
            comment="A change of address: the user whose address it replaces (NULL: a sign-in)",
        ))
        batch.create_index("uq_verification_tokens_user_id", ["user_id"], unique=True)
    if op.get_bind().dialect.name == "postgresql":
        op.create_table_comment(
            "verification_tokens", TOKENS_COMMENT, existing_comment=OLD_TABLE_COMMENT
        )


def downgrade() -> None:
    with op.batch_alter_table("verification_tokens") as batch:
        batch.drop_index("uq_verification_tokens_user_id")
        batch.drop_constraint("fk_verification_tokens_user_id", type_="foreignkey")
        batch.drop_column("user_id")
    if op.get_bind().dialect.name == "postgresql":
        op.create_table_comment(
            "verification_tokens", OLD_TABLE_COMMENT, existing_comment=TOKENS_COMMENT
        )
