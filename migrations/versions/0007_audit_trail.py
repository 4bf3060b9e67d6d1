"""The audit trail: ``auth_events``, and the view ``auth_events_readable`` for DBAs.

Revision ID: 0007_audit_trail
Revises: 0006_passkeys_and_second_factor
Create Date: 2026-11-23

One row per thing that happened to an account or a sign-in attempt (webapp/audit/trail.py):
when, what, success or failure and why, whose, through which provider, from which client
address and device, in which request, and a small JSON detail. The app only inserts;
``flask auth cleanup`` deletes rows older than ``AUDIT_RETENTION``.

``user_id`` references ``users`` with ON DELETE SET NULL, on purpose:

* not CASCADE: deleting an account must not erase its history (the ``account.deleted``
  row included; it names the address it had by its keyed hash, ``subject_hash``);
* not without a key: SQLite gives a new row the highest id plus one, so the id of the
  user created last, once deleted, is given to the next user, whose "Recent activity"
  would then show a stranger's sign-ins. With the key, the deleted user's rows keep what
  happened, when and from where, and name nobody.

The database's SET NULL is the only change ever made to a row. Indexes: (user_id,
occurred_at) for a person's activity and the "new device" check, (occurred_at) for
retention and time ranges, (type, occurred_at) for one kind of event. Downgrade drops the
view and the table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from webapp.storage.models import UTCDateTime

revision = "0007_audit_trail"
down_revision = "0006_passkeys_and_second_factor"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSONDetail = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

VIEW = """
CREATE VIEW auth_events_readable AS
SELECT e.id,
       e.occurred_at,
       e.type,
       e.outcome,
       e.error_code,
       e.user_id,
       u.email AS user_email,
       e.subject_hash,
       e.provider,
       e.ip,
       e.device,
       e.request_id,
       e.detail
  FROM auth_events e
  LEFT JOIN users u ON u.id = e.user_id
"""
VIEW_COMMENT = (
    "COMMENT ON VIEW auth_events_readable IS 'The audit trail with each user''s e-mail "
    "address; never a token, code, password or hash of one.'"
)


def upgrade() -> None:
    op.create_table(
        "auth_events",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("occurred_at", UTCDateTime, nullable=False, comment="When (UTC)"),
        sa.Column("type", sa.String(32), nullable=False,
                  comment="What happened, e.g. signin, session.revoked"),
        sa.Column("outcome", sa.String(16), nullable=False, comment="success or failure"),
        sa.Column("error_code", sa.String(64),
                  comment="Why it failed: an error code (docs/errors.md) or an audit code"),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("users.id", ondelete="SET NULL"),
                  comment="The user it happened to; NULL: none known, or the user was deleted "
                          "since"),
        sa.Column("subject_hash", sa.String(32),
                  comment="Keyed hash of the address or identifier tried, when no user is named"),
        sa.Column("provider", sa.String(64), comment="Provider id"),
        sa.Column("ip", sa.String(45), comment="Client address"),
        sa.Column("device", sa.String(128),
                  comment="Browser and system from the user agent, e.g. Firefox on Linux"),
        sa.Column("request_id", sa.String(64),
                  comment="The request's id, as in the logs and X-Request-ID"),
        sa.Column("detail", JSONDetail,
                  comment="A few more facts (a session id, a count, a reason); never a secret"),
        sa.CheckConstraint("outcome IN ('success', 'failure')", name=op.f("ck_auth_events_outcome")),
        comment="Audit trail of sign-ins and account changes; append-only, no secrets.",
    )
    op.create_index("ix_auth_events_user_id_occurred_at", "auth_events",
                    ["user_id", "occurred_at"])
    op.create_index("ix_auth_events_occurred_at", "auth_events", ["occurred_at"])
    op.create_index("ix_auth_events_type_occurred_at", "auth_events", ["type", "occurred_at"])
    op.execute(VIEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(VIEW_COMMENT)


def downgrade() -> None:
    op.execute("DROP VIEW auth_events_readable")
    op.drop_table("auth_events")
