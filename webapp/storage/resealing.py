"""Re-sealing what is sealed at rest under the current secret (``flask auth rotate-secrets``).

Every sealed column is listed in ``SEALED_AT_REST``; after ``AUTH_SECRET`` changes, this
rewrites each value still sealed under one of ``AUTH_PREVIOUS_SECRETS``, so those can be
retired. It reads and writes the stored form directly (not through the column type, which
would hide an unreadable value as None): a row holding a value that no secret opens is
counted and left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, and_, not_, or_, select, type_coerce, update

from webapp.core import sealing
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import Account, DeviceRequest, Session, TotpAuthenticator

#: Every column sealed at rest, by table.
SEALED_AT_REST: dict[Any, tuple[str, ...]] = {
    Account: ("access_token", "refresh_token", "id_token"),
    Session: ("id_token",),
    DeviceRequest: ("device_code",),
    TotpAuthenticator: ("secret",),
}


@dataclass(frozen=True)
class Resealed:
    """What ``reseal`` did: rows re-sealed, and rows no configured secret opens."""

    changed: int
    unreadable: int


def reseal(*, batch_size: int = 500) -> Resealed:
    """Re-seal every value not sealed under the current secret, a batch per transaction."""
    prefix = sealing.current_prefix()
    changed = unreadable = 0
    for model, names in SEALED_AT_REST.items():
        stored = {name: type_coerce(getattr(model, name), Text) for name in names}
        stale = or_(
            *(and_(col.is_not(None), not_(col.startswith(prefix))) for col in stored.values())
        )
        last = 0
        while True:
            rows = db.session.execute(
                select(model.id, *(col.label(name) for name, col in stored.items()))
                .where(stale, model.id > last)
                .order_by(model.id)
                .limit(batch_size)
                # Locked until the batch commits: a refresh committing in between would
                # otherwise be overwritten with the old (possibly rotated-away) tokens.
                .with_for_update()
            ).all()
            for row in rows:
                values, failed = _resealed(model, names, row, prefix)
                unreadable += failed
                if values:
                    db.session.execute(update(model).where(model.id == row.id).values(values))
                    changed += 1
            transactions.commit()  # the command's own boundary: one transaction per batch
            if len(rows) < batch_size:
                break
            last = rows[-1].id
    return Resealed(changed, unreadable)


def _resealed(
    model: Any, names: tuple[str, ...], row: Any, prefix: str
) -> tuple[dict[Any, Any], int]:
    values: dict[Any, Any] = {}
    for name in names:
        value = getattr(row, name)
        if value is None or value.startswith(prefix):
            continue
        context = f"{model.__tablename__}.{name}"
        try:
            plaintext = sealing.open_sealed(value, context=context)
        except sealing.Unreadable:
            return {}, 1
        # Already sealed: written as is, past the column type's own sealing.
        values[getattr(model, name)] = type_coerce(sealing.seal(plaintext, context=context), Text)
    return values, 0
