"""Recovery codes: ten single-use codes that stand in for the second factor.

Each code is 80 random bits (16 base32 letters, shown as four groups), so the SHA-256 the
table keeps is enough: there is nothing to guess, and no key to lose at a secret rotation.
A code is spent by one conditional UPDATE (``used_at IS NULL``): of concurrent
submissions of one code exactly one wins.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

from sqlalchemy import delete, func, insert, select, update

from webapp.core.clock import utcnow
from webapp.storage.database import execute_counting
from webapp.storage.db import db
from webapp.storage.models import RecoveryCode

COUNT = 10
_BYTES = 10
_LETTERS = 16
_CODE_RE = re.compile(rf"[a-z2-7]{{{_LETTERS}}}")


def _hash(normalised: str) -> str:
    return hashlib.sha256(normalised.encode()).hexdigest()


def normalise(code: str) -> str | None:
    """Return the code's letters in lower case (spaces and dashes dropped), or None."""
    letters = re.sub(r"[\s-]", "", code)[: _LETTERS + 1].lower()
    return letters if _CODE_RE.fullmatch(letters) else None


def replace_codes(user_id: int) -> list[str]:
    """Replace the user's recovery codes with ten new ones; return them (shown once)."""
    codes = []
    for _ in range(COUNT):
        letters = base64.b32encode(secrets.token_bytes(_BYTES)).decode().lower()
        codes.append("-".join(letters[i : i + 4] for i in range(0, _LETTERS, 4)))
    db.session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user_id))
    now = utcnow()
    db.session.execute(
        insert(RecoveryCode),
        [
            {"user_id": user_id, "code_hash": _hash(str(normalise(c))), "created_at": now}
            for c in codes
        ],
    )
    return codes


def spend(user_id: int, code: str) -> bool:
    """Spend one of the user's unused codes, in the caller's transaction; False if none."""
    letters = normalise(code)
    if letters is None:
        return False
    spent = execute_counting(
        update(RecoveryCode)
        .where(
            RecoveryCode.user_id == user_id,
            RecoveryCode.code_hash == _hash(letters),
            RecoveryCode.used_at.is_(None),
        )
        .values(used_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return spent == 1


def all_unused(user_id: int, codes: list[str]) -> bool:
    """Whether every one of ``codes`` is an unused code of the user's (none spent)."""
    hashes = set()
    for code in codes:
        letters = normalise(code)
        if letters is None:
            return False
        hashes.add(_hash(letters))
    if not hashes:
        return False
    found = db.session.execute(
        select(func.count())
        .select_from(RecoveryCode)
        .where(
            RecoveryCode.user_id == user_id,
            RecoveryCode.code_hash.in_(hashes),
            RecoveryCode.used_at.is_(None),
        )
    ).scalar_one()
    return int(found) == len(hashes)


def remaining(user_id: int) -> int:
    """How many of the user's codes are still unused."""
    return int(
        db.session.execute(
            select(func.count())
            .select_from(RecoveryCode)
            .where(RecoveryCode.user_id == user_id, RecoveryCode.used_at.is_(None))
        ).scalar_one()
    )


def remove(user_id: int) -> int:
    """Delete all of the user's codes; return how many there were."""
    return execute_counting(delete(RecoveryCode).where(RecoveryCode.user_id == user_id))
