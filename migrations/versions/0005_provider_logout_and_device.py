"""Provider logout and device sign-in: what sessions remember of the provider's session,
used back-channel logout tokens, device sign-ins in progress.

Revision ID: 0005_provider_logout_and_device
Revises: 0004_sealed_provider_tokens
Create Date: 2026-11-23

Sessions gain ``provider_sub`` (the ID token's subject) and ``id_token`` (sealed, for
``id_token_hint``); ``provider_sid`` was there from the start. ``active_sessions`` shows
whether a provider session is known, never the token. ``used_logout_tokens`` refuses a
replayed back-channel logout token across workers and instances; ``device_requests``
holds device sign-ins in progress (RFC 8628). Downgrade drops all of it; sessions keep
working without it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.storage.models import UTCDateTime

revision = "0005_provider_logout_and_device"
down_revision = "0004_sealed_provider_tokens"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
VIEW_COLUMNS = """
           s.id AS session_id,
           s.user_id,
           u.email AS user_email,
           s.created_at,
           s.last_active_at,
           s.expires,
           s.ip,
           s.user_agent,
           s.provider"""
VIEW_TAIL = """
      FROM sessions s
      JOIN users u ON u.id = s.user_id
     WHERE s.expires > CURRENT_TIMESTAMP"""
NEW_VIEW = (
    "CREATE VIEW active_sessions AS SELECT"
    + VIEW_COLUMNS
    + """,
           (s.provider_sid IS NOT NULL OR s.id_token IS NOT NULL) AS provider_session_known"""
    + VIEW_TAIL
)
OLD_VIEW = "CREATE VIEW active_sessions AS SELECT" + VIEW_COLUMNS + VIEW_TAIL
VIEW_COMMENT = (
    "COMMENT ON VIEW active_sessions IS 'Sessions that have not expired, with the user''s "
    "e-mail and whether the identity provider''s session is known; never the token hash, "
    "never the ID token.'"
)
OLD_VIEW_COMMENT = (
    "COMMENT ON VIEW active_sessions IS "
    "'Sessions that have not expired, with the user''s e-mail; never the token hash.'"
)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute("DROP VIEW active_sessions")
    op.add_column("sessions", sa.Column(
        "provider_sub", sa.String(255), comment="The ID token's subject (sub), for provider logout"))
    op.add_column("sessions", sa.Column(
        "id_token", sa.Text,
        comment="Sealed ID token of the sign-in (AES-GCM under AUTH_SECRET), for id_token_hint"))
    op.create_index("ix_sessions_provider_sub", "sessions", ["provider", "provider_sub"])
    op.execute(NEW_VIEW)
    if postgres:
        op.execute(VIEW_COMMENT)

    op.create_table(
        "used_logout_tokens",
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("jti", sa.String(255), nullable=False),
        sa.Column("expires", UTCDateTime, nullable=False,
                  comment="After this the token is refused by its age alone"),
        sa.PrimaryKeyConstraint("provider", "jti", name="pk_used_logout_tokens"),
        comment="Back-channel logout tokens (provider, jti) seen; replays are refused.",
    )
    op.create_index("ix_used_logout_tokens_expires", "used_logout_tokens", ["expires"])

    op.create_table(
        "device_requests",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("handle_hash", sa.String(64), nullable=False,
                  comment="Hex SHA-256 of the browser's handle"),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("device_code", sa.Text, comment="Sealed device_code (AES-GCM)"),
        sa.Column("user_code", sa.String(64), nullable=False),
        sa.Column("verification_uri", sa.Text, nullable=False),
        sa.Column("verification_uri_complete", sa.Text),
        sa.Column("interval", sa.Integer, nullable=False,
                  comment="Seconds between polls (grows by 5 on slow_down)"),
        sa.Column("next_poll_at", UTCDateTime, nullable=False,
                  comment="The provider may be polled again from then"),
        sa.Column("expires", UTCDateTime, nullable=False),
        sa.Column("callback_url", sa.Text,
                  comment="Where to go after sign-in (already checked to be on this site)"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("handle_hash", name="uq_device_requests_handle_hash"),
        comment="Device sign-ins in progress; device_code sealed, handle hashed.",
    )
    op.create_index("ix_device_requests_expires", "device_requests", ["expires"])


def downgrade() -> None:
    op.drop_table("device_requests")
    op.drop_table("used_logout_tokens")
    op.execute("DROP VIEW active_sessions")
    op.drop_index("ix_sessions_provider_sub", "sessions")
    op.drop_column("sessions", "id_token")
    op.drop_column("sessions", "provider_sub")
    op.execute(OLD_VIEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(OLD_VIEW_COMMENT)
