"""Passkeys and a second factor: authenticators, authenticator apps, recovery codes, spent
passkey challenges, and how a session last proved who it is.

Revision ID: 0006_passkeys_and_second_factor
Revises: 0005_provider_logout_and_device
Create Date: 2026-11-23

Sessions gain ``authenticated_at`` (NULL for older rows: they count from ``created_at``)
and ``amr``. ``authenticators`` keeps passkeys' public keys; ``totp_authenticators`` the
sealed TOTP secret and the last used time step; ``recovery_codes`` SHA-256 hashes only;
``spent_challenges`` refuses a passkey challenge used before. The view
``second_factors`` answers "who has which factor" without any secret. Downgrade drops all
of it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.storage.models import UTCDateTime

revision = "0006_passkeys_and_second_factor"
down_revision = "0005_provider_logout_and_device"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

FACTORS_VIEW = """
CREATE VIEW second_factors AS
SELECT u.id AS user_id,
       u.email,
       t.confirmed_at AS authenticator_app_since,
       (SELECT COUNT(*) FROM recovery_codes r
         WHERE r.user_id = u.id AND r.used_at IS NULL) AS recovery_codes_left,
       (SELECT COUNT(*) FROM authenticators a WHERE a.user_id = u.id) AS passkeys
  FROM users u
  LEFT JOIN totp_authenticators t ON t.user_id = u.id AND t.confirmed_at IS NOT NULL
"""
FACTORS_COMMENT = (
    "COMMENT ON VIEW second_factors IS 'Per user: since when an authenticator app is on, "
    "recovery codes left, passkeys registered; never a secret, hash or key.'"
)


def upgrade() -> None:
    op.add_column("sessions", sa.Column(
        "authenticated_at", UTCDateTime,
        comment="When the person last proved who they are here (NULL: at created_at)"))
    op.add_column("sessions", sa.Column(
        "amr", sa.String(64),
        comment="How they proved it, space-separated (RFC 8176 style: fed, pwd, otp, hwk, mfa)"))

    op.create_table(
        "authenticators",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("credential_id", sa.String(1400), nullable=False,
                  comment="Credential id, base64url"),
        sa.Column("public_key", sa.Text, nullable=False, comment="COSE public key, base64url"),
        sa.Column("sign_count", sa.BigInteger, nullable=False,
                  comment="Last signature counter seen (0: not kept)"),
        sa.Column("transports", sa.String(255),
                  comment="Transports the authenticator named, space-separated"),
        sa.Column("backed_up", sa.Boolean, nullable=False,
                  comment="Synced to a cloud account (a synced passkey)"),
        sa.Column("device_type", sa.String(32), nullable=False,
                  comment="single_device or multi_device"),
        sa.Column("aaguid", sa.String(36), comment="Authenticator model id"),
        sa.Column("name", sa.String(64), nullable=False, comment="Name the person gave"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("last_used_at", UTCDateTime),
        sa.UniqueConstraint("credential_id", name="uq_authenticators_credential_id"),
        comment="Passkeys (WebAuthn credentials); public keys only, nothing secret.",
    )
    op.create_index("ix_authenticators_user_id", "authenticators", ["user_id"])

    op.create_table(
        "totp_authenticators",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("secret", sa.Text, comment="Sealed TOTP secret (AES-GCM under AUTH_SECRET)"),
        sa.Column("confirmed_at", UTCDateTime,
                  comment="When a right code turned it on (NULL: set-up not finished)"),
        sa.Column("last_used_step", sa.BigInteger,
                  comment="Time step of the last accepted code; it and older are refused"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("user_id", name="uq_totp_authenticators_user_id"),
        comment="Authenticator apps (TOTP); the secret sealed, used time steps recorded.",
    )

    op.create_table(
        "recovery_codes",
        sa.Column("id", BigIntPK, primary_key=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("used_at", UTCDateTime, comment="NULL: still usable"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("user_id", "code_hash", name="uq_recovery_codes_user_code"),
        comment="Recovery codes for the second factor; SHA-256 only, spent once.",
    )

    op.create_table(
        "spent_challenges",
        sa.Column("challenge_hash", sa.String(64), primary_key=True),
        sa.Column("expires", UTCDateTime, nullable=False),
        comment="Passkey challenges already used (SHA-256); replays are refused.",
    )
    op.create_index("ix_spent_challenges_expires", "spent_challenges", ["expires"])

    op.execute(FACTORS_VIEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FACTORS_COMMENT)


def downgrade() -> None:
    op.execute("DROP VIEW second_factors")
    op.drop_table("spent_challenges")
    op.drop_table("recovery_codes")
    op.drop_table("totp_authenticators")
    op.drop_table("authenticators")
    op.drop_column("sessions", "amr")
    op.drop_column("sessions", "authenticated_at")
