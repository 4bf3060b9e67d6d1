"""Users, accounts, sessions, verification tokens, rate-limit counters, active_sessions view.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.storage.models import UTCDateTime

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("name", sa.String(255), comment="Display name"),
        sa.Column("email", sa.String(320),
                  comment="Normalised e-mail address (lower case); unique"),
        sa.Column("email_verified", UTCDateTime,
                  comment="When the address was last proven (e-mail link or verified provider)"),
        sa.Column("image", sa.Text, comment="Picture URL"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("email", name="uq_users_email"),
        comment="People who can sign in; one row per person.",
    )
    op.create_table(
        "accounts",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("type", sa.String(32), nullable=False, comment="oidc, oauth, email or credentials"),
        sa.Column("provider", sa.String(64), nullable=False, comment="Provider id"),
        sa.Column("provider_account_id", sa.String(255), nullable=False,
                  comment="The subject at the provider (OIDC sub)"),
        sa.Column("access_token", sa.Text),
        sa.Column("refresh_token", sa.Text),
        sa.Column("id_token", sa.Text),
        sa.Column("expires_at", UTCDateTime, comment="When the access token expires"),
        sa.Column("scope", sa.Text),
        sa.Column("token_type", sa.String(64)),
        sa.Column("session_state", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_accounts"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name="fk_accounts_user_id_users"),
        sa.UniqueConstraint("provider", "provider_account_id",
                            name="uq_accounts_provider_subject"),
        comment="Identities at sign-in providers, linked to users; holds provider tokens.",
    )
    op.create_index("ix_accounts_user_id", "accounts", ["user_id"])
    op.create_table(
        "sessions",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False,
                  comment="Hex SHA-256 of the cookie's token"),
        sa.Column("expires", UTCDateTime, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("last_active_at", UTCDateTime, nullable=False,
                  comment="Last time the session was extended (at most once per update age)"),
        sa.Column("ip", sa.String(45), comment="Client IP at sign-in"),
        sa.Column("user_agent", sa.Text, comment="User agent at sign-in"),
        sa.Column("provider", sa.String(64), comment="Provider id the session was created through"),
        sa.Column("provider_sid", sa.String(255),
                  comment="The identity provider's session id (sid), for provider logout"),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE",
                                name="fk_sessions_user_id_users"),
        sa.UniqueConstraint("token_hash", name="uq_sessions_token_hash"),
        comment="Database sessions; token_hash is SHA-256 of the cookie value.",
    )
    op.create_index("ix_sessions_user_id", "sessions", ["user_id"])
    op.create_index("ix_sessions_expires", "sessions", ["expires"])
    op.create_index("ix_sessions_provider_sid", "sessions", ["provider", "provider_sid"])
    op.create_table(
        "verification_tokens",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("identifier", sa.String(320), nullable=False,
                  comment="Who the token is for (normalised e-mail)"),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("expires", UTCDateTime, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_verification_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_verification_tokens_token_hash"),
        comment="Single-use sign-in tokens; token_hash is HMAC-SHA-256 keyed from AUTH_SECRET.",
    )
    op.create_index("ix_verification_tokens_identifier", "verification_tokens", ["identifier"])
    op.create_index("ix_verification_tokens_expires", "verification_tokens", ["expires"])
    op.create_table(
        "rate_limit_counters",
        sa.Column("key", sa.String(400), nullable=False,
                  comment="What is counted, e.g. credentials-ip:203.0.113.9"),
        sa.Column("window_start", UTCDateTime, nullable=False),
        sa.Column("window_end", UTCDateTime, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("key", "window_start", name="pk_rate_limit_counters"),
        comment="Rate limit counters (credentials failures, e-mail sends, log beacons).",
    )
    op.create_index("ix_rate_limit_counters_window_end", "rate_limit_counters", ["window_end"])

    op.execute(
        """
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
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "COMMENT ON VIEW active_sessions IS "
            "'Sessions that have not expired, with the user''s e-mail; never the token hash.'"
        )


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS active_sessions")
    op.drop_table("rate_limit_counters")
    op.drop_table("verification_tokens")
    op.drop_table("sessions")
    op.drop_table("accounts")
    op.drop_table("users")
