"""Two-step verification for the account area: turn the authenticator app on and off,
replace recovery codes. (Confirming it is you with the app's code is the step-up of
webapp/flows/signin/verification.py.)

Every change needs a recent sign-in (``reauth``): with a stolen session cookie alone, an
attacker must neither plant their own authenticator nor remove the owner's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select

from webapp.audit import trail
from webapp.core.clock import utcnow
from webapp.errors import AccountError
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import NOT_FOUND, account_gone
from webapp.i18n import gettext
from webapp.second_factor import recovery_codes, totp, verification
from webapp.second_factor.verification import Status
from webapp.sessions.store import AuthSession
from webapp.settings import current_settings
from webapp.storage.database import HotSelect
from webapp.storage.db import db
from webapp.storage.models import TotpAuthenticator, User

ALREADY_ON = "TwoFactorAlreadyOn"
NOT_ON = "TwoFactorNotOn"
WRONG_CODE = "WrongCode"
#: A set-up page reloaded within this shows the same key (the app may have it already).
SETUP_REUSE = timedelta(minutes=15)


@dataclass(frozen=True)
class Setup:
    """What the set-up page shows: the key as text, and as a link (and its QR code)."""

    key: str
    uri: str


_STATUS = HotSelect(select(*verification.STATUS_COLUMNS))


def status(user_id: int) -> Status:
    """Read what the account pages say about the user's second factors, in one statement."""
    return Status.of(_STATUS.one({"user_id": user_id}))


def begin_setup(*, user_id: int, current: AuthSession) -> Setup:
    """Create (or, on a reload, reuse) the key of an authenticator app not yet confirmed."""
    require_recent(current)
    user = _user(user_id)
    row = _setup_row(user_id)
    if row is not None and row.confirmed_at is not None:
        raise AccountError(ALREADY_ON, gettext("Two-step verification is already on."))
    if row is None or row.secret is None or row.created_at + SETUP_REUSE < utcnow():
        if row is not None:
            db.session.delete(row)
            db.session.flush()
        row = TotpAuthenticator(user_id=user_id, secret=totp.new_secret(), created_at=utcnow())
        db.session.add(row)
    assert row.secret is not None
    uri = totp.provisioning_uri(
        row.secret,
        account=user.email or str(user.name or user.id),
        issuer=current_settings().brand.name,
    )
    return Setup(key=totp.grouped(row.secret), uri=uri)


def confirm_setup(*, user_id: int, current: AuthSession, code: str) -> list[str]:
    """Turn the authenticator app on with a right code from it; return the new recovery
    codes (shown once). The code is spent: it cannot pass a sign-in afterwards."""
    require_recent(current)
    row = _setup_row(user_id)
    if row is None or row.confirmed_at is not None:
        raise AccountError(
            NOT_ON, gettext("Start the set-up again: that key is no longer waiting.")
        )
    if not totp.spend(row, code[:64]):
        raise AccountError(
            WRONG_CODE, gettext("That code is not right. Check the app and try again.")
        )
    row.confirmed_at = utcnow()
    trail.record(trail.Event.SECOND_FACTOR_ON, user_id=user_id)
    return recovery_codes.replace_codes(user_id)


def turn_off(*, user_id: int, current: AuthSession) -> None:
    """Remove the authenticator app and the recovery codes."""
    require_recent(current)
    if not verification.has_second_factor(user_id):
        raise AccountError(NOT_ON, gettext("Two-step verification is not on."))
    remove_all(user_id)
    trail.record(trail.Event.SECOND_FACTOR_OFF, user_id=user_id, detail={"by": trail.BY_USER})


def new_recovery_codes(*, user_id: int, current: AuthSession) -> list[str]:
    """Replace the recovery codes (the old ones stop working); return the new ones."""
    require_recent(current)
    if not verification.has_second_factor(user_id):
        raise AccountError(NOT_ON, gettext("Turn on two-step verification first."))
    codes = recovery_codes.replace_codes(user_id)
    trail.record(trail.Event.RECOVERY_CODES_REPLACED, user_id=user_id)
    return codes


def shown_codes(*, user_id: int, codes: list[str]) -> list[str]:
    """Return ``codes``, the recovery codes a page showed once and sends back (to download
    them, or to show them again in another language), if they are all the user's and
    unused; else refuse: a page that shows codes shows only ones that work. Needs no recent
    sign-in: whoever sends them holds them already."""
    if not 0 < len(codes) <= recovery_codes.COUNT or not recovery_codes.all_unused(user_id, codes):
        raise AccountError(
            NOT_FOUND,
            gettext(
                "Those recovery codes no longer work. If you did not save them, make new ones."
            ),
        )
    return codes


def remove_all(user_id: int) -> int:
    """Delete the user's authenticator app and recovery codes; return how many codes went."""
    db.session.execute(delete(TotpAuthenticator).where(TotpAuthenticator.user_id == user_id))
    return recovery_codes.remove(user_id)


def _setup_row(user_id: int) -> TotpAuthenticator | None:
    return db.session.execute(
        select(TotpAuthenticator).where(TotpAuthenticator.user_id == user_id)
    ).scalar_one_or_none()


def _user(user_id: int) -> User:
    user = db.session.get(User, user_id)
    if user is None:
        raise account_gone()
    return user
