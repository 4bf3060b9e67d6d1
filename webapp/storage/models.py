# mypy: disable-error-code="name-defined"
# (Flask-SQLAlchemy builds db.Model at run time; mypy cannot see it as a class.)
"""The database schema: users, accounts, sessions, verification tokens, rate counters and the
audit trail.

Column names are plain so that a DBA can read and query the tables directly; times are
``timestamp with time zone`` in UTC. Tokens are never stored as given: sessions keep the
SHA-256 of their cookie value, verification tokens a keyed hash, and accounts the
provider's tokens sealed (AES-GCM, ``webapp.core.sealing``), since those must be read back.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column, relationship

from webapp.core import sealing
from webapp.core.clock import utcnow
from webapp.storage.db import db

log = logging.getLogger(__name__)

# SQLite has no BIGINT autoincrement; the variant keeps integer primary keys working there.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp with time zone that always comes back aware, in UTC (SQLite included)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given for a timestamp with time zone")
        value = value.astimezone(UTC)
        # SQLite stores text; keep it naive UTC there so comparisons sort correctly.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class SealedText(TypeDecorator[str]):
    """Text sealed at rest (``webapp.core.sealing``), bound to the column it is declared for.

    Python code sees the plaintext; the database only the sealed value. A value no
    configured secret opens (sealed under a secret since retired without
    ``flask auth rotate-secrets``) reads as None, with a warning: a token we cannot read is
    no token, and the page that loaded the row still works.
    """

    impl = Text
    cache_ok = True

    def __init__(self, context: str) -> None:
        super().__init__()
        self.context = context

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else sealing.seal(value, context=self.context)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        try:
            return sealing.open_sealed(str(value), context=self.context)
        except sealing.Unreadable as exc:
            log.warning("%s: a stored value is unreadable, read as none: %s", self.context, exc)
            return None


class User(db.Model):
    """A person who can sign in."""

    __tablename__ = "users"
    __table_args__ = (
        Index("ix_users_email", "email"),
        # An address is identity only once proven: unverified claims may share it (see
        # accounts.py), a verified one belongs to one user. Migration 0003 made it so.
        Index(
            "uq_users_verified_email",
            "email",
            unique=True,
            postgresql_where=text("email_verified IS NOT NULL"),
            sqlite_where=text("email_verified IS NOT NULL"),
        ),
        {"comment": "People who can sign in; one row per person."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(255), comment="Display name")
    email: Mapped[str | None] = mapped_column(
        String(320),
        comment="Normalised e-mail address (lower case); unique among verified addresses",
    )
    email_verified: Mapped[datetime | None] = mapped_column(
        UTCDateTime, comment="When the address was last proven (e-mail link or verified provider)"
    )
    image: Mapped[str | None] = mapped_column(Text, comment="Picture URL")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime, default=utcnow, onupdate=utcnow, nullable=False
    )

    accounts: Mapped[list[Account]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )
    sessions: Mapped[list[Session]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )


#: What a DBA reads on a sealed token column (migration 0004 sets the same text).
SEALED_COMMENT = "Sealed provider token (AES-GCM under AUTH_SECRET); NULL when none"


class Account(db.Model):
    """A way for a user to sign in: an identity at a provider, with its tokens."""

    __tablename__ = "accounts"
    __table_args__ = (
        UniqueConstraint("provider", "provider_account_id", name="uq_accounts_provider_subject"),
        Index("ix_accounts_user_id", "user_id"),
        {"comment": "Identities at sign-in providers, linked to users; provider tokens sealed."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )
    type: Mapped[str] = mapped_column(
        String(32), nullable=False, comment="oidc, oauth, email or credentials"
    )
    provider: Mapped[str] = mapped_column(String(64), nullable=False, comment="Provider id")
    provider_account_id: Mapped[str] = mapped_column(
        String(255), nullable=False, comment="The subject at the provider (OIDC sub)"
    )
    access_token: Mapped[str | None] = mapped_column(
        SealedText("accounts.access_token"), comment=SEALED_COMMENT
    )
    refresh_token: Mapped[str | None] = mapped_column(
        SealedText("accounts.refresh_token"), comment=SEALED_COMMENT
    )
    id_token: Mapped[str | None] = mapped_column(
        SealedText("accounts.id_token"), comment=SEALED_COMMENT
    )
    expires_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, comment="When the access token expires"
    )
    scope: Mapped[str | None] = mapped_column(Text)
    token_type: Mapped[str | None] = mapped_column(String(64))
    session_state: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime, default=utcnow, onupdate=utcnow, nullable=False
    )

    user: Mapped[User] = relationship(back_populates="accounts")


class Session(db.Model):
    """A signed-in browser. The cookie holds the token; the row only its SHA-256."""

    __tablename__ = "sessions"
    __table_args__ = (
        Index("ix_sessions_user_id", "user_id"),
        Index("ix_sessions_expires", "expires"),
        Index("ix_sessions_provider_sid", "provider", "provider_sid"),
        Index("ix_sessions_provider_sub", "provider", "provider_sub"),
        {"comment": "Database sessions; token_hash is SHA-256 of the cookie value."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )
    token_hash: Mapped[str] = mapped_column(
        String(64), unique=True, nullable=False, comment="Hex SHA-256 of the cookie's token"
    )
    expires: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    last_active_at: Mapped[datetime] = mapped_column(
        UTCDateTime,
        default=utcnow,
        nullable=False,
        comment="Last time the session was extended (at most once per update age)",
    )
    ip: Mapped[str | None] = mapped_column(String(45), comment="Client IP at sign-in")
    user_agent: Mapped[str | None] = mapped_column(Text, comment="User agent at sign-in")
    provider: Mapped[str | None] = mapped_column(
        String(64), comment="Provider id the session was created through"
    )
    provider_sid: Mapped[str | None] = mapped_column(
        String(255), comment="The identity provider's session id (sid), for provider logout"
    )
    provider_sub: Mapped[str | None] = mapped_column(
        String(255), comment="The ID token's subject (sub), for provider logout"
    )
    id_token: Mapped[str | None] = mapped_column(
        SealedText("sessions.id_token"),
        # Read only at sign-out: listing sessions must not open every row's token.
        deferred=True,
        comment="Sealed ID token of the sign-in (AES-GCM under AUTH_SECRET), for id_token_hint",
    )
    authenticated_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime,
        comment="When the person last proved who they are here (NULL: at created_at)",
    )
    amr: Mapped[str | None] = mapped_column(
        String(64),
        comment="How they proved it, space-separated (RFC 8176 style: fed, pwd, otp, hwk, mfa)",
    )

    user: Mapped[User] = relationship(back_populates="sessions")


class Authenticator(db.Model):
    """A passkey (WebAuthn credential) a user registered: a way to sign in, and a second
    factor when it verified the person (``uv``). Only the public key is stored."""

    __tablename__ = "authenticators"
    __table_args__ = (
        Index("ix_authenticators_user_id", "user_id"),
        {"comment": "Passkeys (WebAuthn credentials); public keys only, nothing secret."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )
    credential_id: Mapped[str] = mapped_column(
        String(1400), unique=True, nullable=False, comment="Credential id, base64url"
    )
    public_key: Mapped[str] = mapped_column(
        Text, nullable=False, comment="COSE public key, base64url"
    )
    sign_count: Mapped[int] = mapped_column(
        BigInteger, nullable=False, comment="Last signature counter seen (0: not kept)"
    )
    transports: Mapped[str | None] = mapped_column(
        String(255), comment="Transports the authenticator named, space-separated"
    )
    backed_up: Mapped[bool] = mapped_column(
        Boolean, nullable=False, comment="Synced to a cloud account (a synced passkey)"
    )
    device_type: Mapped[str] = mapped_column(
        String(32), nullable=False, comment="single_device or multi_device"
    )
    aaguid: Mapped[str | None] = mapped_column(String(36), comment="Authenticator model id")
    name: Mapped[str] = mapped_column(String(64), nullable=False, comment="Name the person gave")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TotpAuthenticator(db.Model):
    """A user's authenticator app (TOTP, RFC 6238): on once ``confirmed_at`` is set."""

    __tablename__ = "totp_authenticators"
    __table_args__ = (
        {"comment": "Authenticator apps (TOTP); the secret sealed, used time steps recorded."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), unique=True, nullable=False
    )
    secret: Mapped[str | None] = mapped_column(
        SealedText("totp_authenticators.secret"),
        comment="Sealed TOTP secret (AES-GCM under AUTH_SECRET)",
    )
    confirmed_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, comment="When a right code turned it on (NULL: set-up not finished)"
    )
    last_used_step: Mapped[int | None] = mapped_column(
        BigInteger, comment="Time step of the last accepted code; it and older are refused"
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)


class RecoveryCode(db.Model):
    """A single-use recovery code; only its SHA-256 is kept (80 random bits)."""

    __tablename__ = "recovery_codes"
    __table_args__ = (
        UniqueConstraint("user_id", "code_hash", name="uq_recovery_codes_user_code"),
        {"comment": "Recovery codes for the second factor; SHA-256 only, spent once."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )
    code_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, comment="NULL: still usable")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)


class SpentChallenge(db.Model):
    """A one-time value already used, kept until its cookie would have expired: a passkey
    challenge checked once, or the id of a pending sign-in passed (``pending_signin``).
    Each is single use on every worker and instance."""

    __tablename__ = "spent_challenges"
    __table_args__ = (
        Index("ix_spent_challenges_expires", "expires"),
        {
            "comment": "One-time values already used (SHA-256): passkey challenges and "
            "pending sign-ins; replays are refused."
        },
    )

    challenge_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


class SsoJoin(db.Model):
    """A provider declared for an e-mail domain joined an existing user by their verified
    address (docs/how-to/sso-by-domain.md): at most once per user and provider. Undone by
    the operator, the row stays (``undone_at``) so the join is not made again by itself."""

    __tablename__ = "sso_joins"
    __table_args__ = (
        UniqueConstraint("user_id", "provider", name="uq_sso_joins_user_provider"),
        {"comment": "Existing users joined to a provider by their verified e-mail domain."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )
    provider: Mapped[str] = mapped_column(String(64), nullable=False, comment="Provider id")
    email: Mapped[str] = mapped_column(
        String(320), nullable=False, comment="The verified address the join went by"
    )
    account_id: Mapped[int | None] = mapped_column(
        BigInteger,
        ForeignKey("accounts.id", ondelete="SET NULL"),
        comment="The account the join made (NULL once removed)",
    )
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    undone_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, comment="When the operator undid it (flask auth sso undo)"
    )


class UsedLogoutToken(db.Model):
    """A back-channel logout token already acted on, kept until it could no longer be
    accepted anyway, so a replay is refused on every instance."""

    __tablename__ = "used_logout_tokens"
    __table_args__ = (
        Index("ix_used_logout_tokens_expires", "expires"),
        {"comment": "Back-channel logout tokens (provider, jti) seen; replays are refused."},
    )

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    jti: Mapped[str] = mapped_column(String(255), primary_key=True)
    expires: Mapped[datetime] = mapped_column(
        UTCDateTime, nullable=False, comment="After this the token is refused by its age alone"
    )


class SpentSamlAssertion(db.Model):
    """A SAML assertion already signed in with, kept until its bearer confirmation ends
    (then it is refused by its time alone), so a replay is refused on every instance."""

    __tablename__ = "spent_saml_assertions"
    __table_args__ = (
        Index("ix_spent_saml_assertions_expires", "expires"),
        {"comment": "SAML assertions (provider, SHA-256 of the ID) accepted; replays are refused."},
    )

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    assertion_hash: Mapped[str] = mapped_column(
        String(64), primary_key=True, comment="Hex SHA-256 of the assertion's ID"
    )
    expires: Mapped[datetime] = mapped_column(
        UTCDateTime, nullable=False, comment="After this the assertion is refused by its age alone"
    )


class DeviceRequest(db.Model):
    """A device sign-in in progress (RFC 8628): the browser holds only a random handle.

    The row serialises the polls of every tab and instance, so the provider is never
    asked faster than it allows.
    """

    __tablename__ = "device_requests"
    __table_args__ = (
        Index("ix_device_requests_expires", "expires"),
        {"comment": "Device sign-ins in progress; device_code sealed, handle hashed."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    handle_hash: Mapped[str] = mapped_column(
        String(64), unique=True, nullable=False, comment="Hex SHA-256 of the browser's handle"
    )
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    device_code: Mapped[str | None] = mapped_column(
        SealedText("device_requests.device_code"), comment="Sealed device_code (AES-GCM)"
    )
    user_code: Mapped[str] = mapped_column(String(64), nullable=False)
    verification_uri: Mapped[str] = mapped_column(Text, nullable=False)
    verification_uri_complete: Mapped[str | None] = mapped_column(Text)
    interval: Mapped[int] = mapped_column(
        Integer, nullable=False, comment="Seconds between polls (grows by 5 on slow_down)"
    )
    next_poll_at: Mapped[datetime] = mapped_column(
        UTCDateTime, nullable=False, comment="The provider may be polled again from then"
    )
    expires: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    callback_url: Mapped[str | None] = mapped_column(
        Text, comment="Where to go after sign-in (already checked to be on this site)"
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)


#: What a DBA reads on ``verification_tokens`` (migration 0009 sets the same text).
TOKENS_COMMENT = (
    "Single-use e-mail sign-ins and changes of address; only keyed hashes "
    "(HMAC-SHA-256, AUTH_SECRET)."
)


class VerificationToken(db.Model):
    """A single-use e-mail link, only keyed hashes stored: a sign-in (link and one-time
    code), or a signed-in user's change of address (``user_id``, one at a time each)."""

    __tablename__ = "verification_tokens"
    __table_args__ = (
        Index("ix_verification_tokens_identifier", "identifier"),
        Index("ix_verification_tokens_expires", "expires"),
        Index("ix_verification_tokens_browser_hash", "browser_hash"),
        Index("uq_verification_tokens_user_id", "user_id", unique=True),
        {"comment": TOKENS_COMMENT},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    identifier: Mapped[str] = mapped_column(
        String(320), nullable=False, comment="Who the token is for (normalised e-mail)"
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    expires: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, nullable=False)
    code_hash: Mapped[str | None] = mapped_column(
        String(64), comment="Keyed hash of the one-time code sent with the link"
    )
    browser_hash: Mapped[str | None] = mapped_column(
        String(64), comment="Keyed hash of the requesting browser's cookie (code works there only)"
    )
    attempts: Mapped[int] = mapped_column(
        Integer,
        nullable=False,
        default=0,
        server_default="0",
        comment="Wrong one-time codes tried so far",
    )
    callback_url: Mapped[str | None] = mapped_column(
        Text, comment="Where to go after sign-in (already checked to be on this site)"
    )
    user_id: Mapped[int | None] = mapped_column(
        BigInteger,
        ForeignKey("users.id", ondelete="CASCADE"),
        comment="A change of address: the user whose address it replaces (NULL: a sign-in)",
    )


class RateLimitCounter(db.Model):
    """A fixed-window event counter, shared by every app instance on the database."""

    __tablename__ = "rate_limit_counters"
    __table_args__ = (
        Index("ix_rate_limit_counters_window_end", "window_end"),
        {"comment": "Rate limit counters (credentials failures, e-mail sends, log beacons)."},
    )

    key: Mapped[str] = mapped_column(
        String(400), primary_key=True, comment="What is counted, e.g. credentials-ip:203.0.113.9"
    )
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    window_end: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)


#: A small JSON object; JSONB on PostgreSQL, so a DBA can query into it (``detail->>'reason'``).
JSONDetail = JSON().with_variant(JSONB(), "postgresql")


class AuthEvent(db.Model):
    """One thing that happened to an account or a sign-in attempt (``webapp.audit.trail``).

    Append-only: rows are inserted by the app and deleted only by retention (``flask auth
    cleanup``). Never a token, code, password or hash of one; an address that is no user
    only as a keyed hash.
    """

    __tablename__ = "auth_events"
    __table_args__ = (
        Index("ix_auth_events_user_id_occurred_at", "user_id", "occurred_at"),
        Index("ix_auth_events_occurred_at", "occurred_at"),
        Index("ix_auth_events_type_occurred_at", "type", "occurred_at"),
        CheckConstraint("outcome IN ('success', 'failure')", name="outcome"),
        {"comment": "Audit trail of sign-ins and account changes; append-only, no secrets."},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, comment="When (UTC)")
    type: Mapped[str] = mapped_column(
        String(32), nullable=False, comment="What happened, e.g. signin, session.revoked"
    )
    outcome: Mapped[str] = mapped_column(String(16), nullable=False, comment="success or failure")
    error_code: Mapped[str | None] = mapped_column(
        String(64), comment="Why it failed: an error code (docs/errors.md) or an audit code"
    )
    user_id: Mapped[int | None] = mapped_column(
        BigInteger,
        ForeignKey("users.id", ondelete="SET NULL"),
        comment="The user it happened to; NULL: none known, or the user was deleted since",
    )
    subject_hash: Mapped[str | None] = mapped_column(
        String(32),
        comment="Keyed hash of the address or identifier tried, when no user is named",
    )
    provider: Mapped[str | None] = mapped_column(String(64), comment="Provider id")
    ip: Mapped[str | None] = mapped_column(String(45), comment="Client address")
    device: Mapped[str | None] = mapped_column(
        String(128), comment="Browser and system from the user agent, e.g. Firefox on Linux"
    )
    request_id: Mapped[str | None] = mapped_column(
        String(64), comment="The request's id, as in the logs and X-Request-ID"
    )
    detail: Mapped[dict[str, Any] | None] = mapped_column(
        JSONDetail, comment="A few more facts (a session id, a count, a reason); never a secret"
    )
