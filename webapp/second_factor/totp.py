"""Authenticator apps (TOTP, RFC 6238): SHA-1, 6 digits, 30-second steps, ±1 step of skew.

A code is accepted once: the time step it matched is recorded, and a code of that step or
an earlier one is refused afterwards. The record is one conditional UPDATE
(``last_used_step < step``), so of concurrent submissions of one code exactly one wins:
PostgreSQL re-checks the condition after the first one commits, SQLite serialises writers.
"""

from __future__ import annotations

import hmac
import re
from datetime import datetime

import pyotp
from sqlalchemy import or_, update

from webapp.core.clock import utcnow
from webapp.storage.database import execute_counting
from webapp.storage.models import TotpAuthenticator

DIGITS = 6
STEP_SECONDS = 30
#: Steps accepted either side of the current one (clock skew of the person's phone).
SKEW_STEPS = 1

_CODE_RE = re.compile(rf"\d{{{DIGITS}}}")


def new_secret() -> str:
    """Return a new random secret: 160 bits, base32, as RFC 4226 recommends."""
    return pyotp.random_base32(32)


def normalise_code(code: str) -> str | None:
    """Return the code's digits (spaces and a middle dash allowed), or None if it is none."""
    digits = re.sub(r"[\s-]", "", code)[: DIGITS + 1]
    return digits if _CODE_RE.fullmatch(digits) else None


def provisioning_uri(secret: str, *, account: str, issuer: str) -> str:
    """Return the ``otpauth://`` URI apps and password managers read (QR code or link)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=account, issuer_name=issuer
    )


def grouped(secret: str) -> str:
    """Return the secret in groups of four, for typing it by hand."""
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


def matching_step(secret: str, code: str, now: datetime | None = None) -> int | None:
    """Return the time step whose code ``code`` is (within the skew), or None."""
    digits = normalise_code(code)
    if digits is None:
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    current = totp.timecode(now or utcnow())
    found = None
    # Every candidate is compared (no early exit), in constant time each.
    for step in range(current - SKEW_STEPS, current + SKEW_STEPS + 1):
        if hmac.compare_digest(totp.generate_otp(step).encode(), digits.encode()):
            found = step
    return found


def spend(row: TotpAuthenticator, code: str) -> bool:
    """Accept ``code`` for ``row``'s secret once, in the caller's transaction."""
    if row.secret is None:
        return False
    step = matching_step(row.secret, code)
    if step is None:
        return False
    won = execute_counting(
        update(TotpAuthenticator)
        .where(
            TotpAuthenticator.user_id == row.user_id,
            or_(
                TotpAuthenticator.last_used_step.is_(None),
                TotpAuthenticator.last_used_step < step,
            ),
        )
        .values(last_used_step=step)
        .execution_options(synchronize_session=False)
    )
    return won == 1
