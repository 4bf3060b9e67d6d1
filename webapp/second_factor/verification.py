"""Second factors: whether a user has one, and checking a code against them.

A user has a second factor once an authenticator app (TOTP) is confirmed; its recovery
codes stand in for it, and a passkey (``flows.passkey``) is accepted in its place. A
passkey alone does not turn two-step verification on: it is a way to sign in, and with
user verification it is both factors at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, select

from webapp.second_factor import recovery_codes, totp
from webapp.storage.db import db
from webapp.storage.models import Authenticator, RecoveryCode, TotpAuthenticator

#: What a code proved, for a session's ``amr``.
OTP = "otp"
RECOVERY_CODE = "rec"
#: A passkey (a key held in hardware, RFC 8176 ``hwk``).
PASSKEY = "hwk"
#: In ``amr``: two factors were checked (ours, or the identity provider's when trusted).
MFA = "mfa"


@dataclass(frozen=True)
class Status:
    """What the account pages say about a user's second factors."""

    on_since: datetime | None
    recovery_codes_left: int
    passkeys: int

    @classmethod
    def of(cls, row: Any) -> Status:
        """The status from a row with ``STATUS_COLUMNS``."""
        return cls(
            on_since=row.on_since,
            recovery_codes_left=int(row.codes_left) if row.on_since else 0,
            passkeys=int(row.passkeys),
        )


#: The status as columns of one row, for the ``user_id`` parameter: a statement of their
#: own, or beside the user's in the account page's read.
STATUS_COLUMNS = (
    select(TotpAuthenticator.confirmed_at)
    .where(TotpAuthenticator.user_id == bindparam("user_id"))
    .scalar_subquery()
    .label("on_since"),
    select(func.count())
    .where(RecoveryCode.user_id == bindparam("user_id"), RecoveryCode.used_at.is_(None))
    .scalar_subquery()
    .label("codes_left"),
    select(func.count())
    .where(Authenticator.user_id == bindparam("user_id"))
    .scalar_subquery()
    .label("passkeys"),
)


def _confirmed(user_id: int) -> tuple[ColumnElement[bool], ...]:
    return (TotpAuthenticator.user_id == user_id, TotpAuthenticator.confirmed_at.is_not(None))


def authenticator_app(user_id: int) -> TotpAuthenticator | None:
    """Return the user's confirmed authenticator app, or None."""
    return db.session.execute(
        select(TotpAuthenticator).where(*_confirmed(user_id))
    ).scalar_one_or_none()


def has_second_factor(user_id: int) -> bool:
    """Whether the user has a confirmed authenticator app (without opening its secret:
    this runs at every sign-in)."""
    found = db.session.execute(select(TotpAuthenticator.id).where(*_confirmed(user_id))).first()
    return found is not None


def check_code(user_id: int, code: str, *, recovery: bool = True) -> str | None:
    """Spend ``code`` as the user's TOTP code or (``recovery``) one of their recovery codes,
    in the caller's transaction; return what it proved (``OTP``, ``RECOVERY_CODE``) or None.
    """
    app = authenticator_app(user_id)
    if app is None:
        return None
    if totp.normalise_code(code) is not None:
        return OTP if totp.spend(app, code) else None
    if recovery and recovery_codes.spend(user_id, code):
        return RECOVERY_CODE
    return None


def with_factor(amr: tuple[str, ...], factor: str) -> tuple[str, ...]:
    """Return ``amr`` with ``factor`` added and marked as two factors."""
    return tuple(dict.fromkeys((*amr, factor, MFA)))
