"""An e-mail address is unique only among verified ones: unverified claims may share it.

Revision ID: 0003_verified_email_identity
Revises: 0002_email_sign_in
Create Date: 2026-11-22

Upgrade replaces the UNIQUE constraint on ``users.email`` by a plain index and a unique
partial index on ``email WHERE email_verified IS NOT NULL`` (docs/security.md: an unverified
address is never identity). Downgrade restores the constraint; first, every unverified
user whose address another user also holds loses it (``email`` set to NULL), since those
are exactly the rows UNIQUE would refuse. A verified address is never cleared: the
partial index guarantees at most one per address.

SQLite cannot drop a constraint, so the users table is rebuilt there (batch mode). The
rebuild drops the old table, and with foreign keys on, SQLite's implicit ``DELETE`` would
cascade to every account and session: foreign keys are off for the rebuild (a PRAGMA that
only works outside a transaction, hence the autocommit blocks) and checked afterwards. The
``active_sessions`` view names the table, so it is dropped and made again around it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = "0003_verified_email_identity"
down_revision = "0002_email_sign_in"
branch_labels = None
depends_on = None

VERIFIED = sa.text("email_verified IS NOT NULL")
EMAIL_COMMENT = "Normalised e-mail address (lower case); unique among verified addresses"
OLD_EMAIL_COMMENT = "Normalised e-mail address (lower case); unique"
# As 0001 made it; SQLite checks a view's table when the rebuilt table is renamed.
ACTIVE_SESSIONS_VIEW = """
    CREATE VIEW active_sessions AS
    SELECT s.id AS session_id,
           s.user_id,
           u.email AS user_email,
           s.created_at,
           s.last_active_at,
           s.expires,
           s.ip,
           s.user_agent,
           s.provider
      FROM sessions s
      JOIN users u ON u.id = s.user_id
     WHERE s.expires > CURRENT_TIMESTAMP
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with _sqlite_users_rebuild():
            with op.batch_alter_table("users", recreate="always") as batch:
                batch.drop_constraint("uq_users_email", type_="unique")
    else:
        op.drop_constraint("uq_users_email", "users", type_="unique")
        op.alter_column("users", "email", existing_type=sa.String(320), comment=EMAIL_COMMENT,
                        existing_comment=OLD_EMAIL_COMMENT)
    op.create_index("ix_users_email", "users", ["email"])
    op.create_index("uq_users_verified_email", "users", ["email"], unique=True,
                    postgresql_where=VERIFIED, sqlite_where=VERIFIED)


def downgrade() -> None:
    op.execute(
        """
        UPDATE users SET email = NULL
         WHERE email_verified IS NULL
           AND email IN (SELECT email FROM users GROUP BY email HAVING COUNT(*) > 1)
        """
    )
    op.drop_index("uq_users_verified_email", "users")
    op.drop_index("ix_users_email", "users")
    if op.get_bind().dialect.name == "sqlite":
        with _sqlite_users_rebuild():
            with op.batch_alter_table("users", recreate="always") as batch:
                batch.create_unique_constraint("uq_users_email", ["email"])
    else:
        op.create_unique_constraint("uq_users_email", "users", ["email"])
        op.alter_column("users", "email", existing_type=sa.String(320),
                        comment=OLD_EMAIL_COMMENT, existing_comment=EMAIL_COMMENT)


@contextmanager
def _sqlite_users_rebuild() -> Iterator[None]:
    """Let the body rebuild ``users`` on SQLite without cascading deletes or a broken view."""
    context = op.get_context()
    with context.autocommit_block():
        op.execute("PRAGMA foreign_keys=OFF")
    try:
        op.execute("DROP VIEW active_sessions")
        yield
        op.execute(ACTIVE_SESSIONS_VIEW)
        broken = op.get_bind().exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"foreign keys broken by the users rebuild: {broken[:5]}")
    except BaseException:
        # The caller rolls the migration back; the connection, foreign keys still off,
        # must not go back to the pool.
        op.get_bind().invalidate()
        raise
    with context.autocommit_block():
        op.execute("PRAGMA foreign_keys=ON")
