"""Passing the second factor: a pending sign-in becomes a session, a session proves itself
again (step-up).

Wrong codes are counted before they are checked (``throttles.admit``), per user and per
client address, in the shared database counters; once a limit is reached the pending
sign-in is dropped and the person starts again (and stays throttled for the window). A
right code does not count.

A pending sign-in passes once (``pending_signin.spend``): it is spent in the transaction
that starts its session, before its code is looked at, so a copy of its cookie is refused
with ``SecondFactorExpired`` whatever code comes with it, and a wrong code spends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import select

from webapp.audit import throttles, trail
from webapp.errors import AuthError
from webapp.flows.signin.finish import start_session
from webapp.second_factor import pending_signin, recovery_codes, verification
from webapp.second_factor.pending_signin import Signin
from webapp.second_factor.verification import PASSKEY
from webapp.sessions.store import AuthSession, record_authentication
from webapp.settings import current_settings
from webapp.storage.db import db
from webapp.storage.models import Authenticator, User


class WrongCode(Exception):
    """The code was not the user's; the person may try again, ``tries_left`` more times
    in the throttles' windows (0: not before they end)."""

    def __init__(self, tries_left: int) -> None:
        super().__init__(tries_left)
        self.tries_left = tries_left


class TooManyCodes(Exception):
    """Too many wrong codes for this user or client address; wait for the window to end."""


@dataclass(frozen=True)
class Challenge:
    """What the second-factor page offers for a pending sign-in."""

    signin: Signin
    #: The user has a passkey: "Use a passkey" is offered.
    has_passkey: bool


def current_challenge() -> Challenge:
    """Return this browser's pending sign-in; ``SecondFactorExpired`` when there is none
    (or it was passed already, from a copy of its cookie)."""
    signin = _held()
    _require_user(signin.user_id)
    if pending_signin.spent(signin):
        pending_signin.drop()
        raise AuthError("SecondFactorExpired", f"user {signin.user_id}: passed already")
    has_passkey = db.session.execute(
        select(Authenticator.id).where(Authenticator.user_id == signin.user_id).limit(1)
    ).first()
    return Challenge(signin, has_passkey is not None and passkey_may_pass(signin))


def passkey_may_pass(signin: Signin) -> bool:
    """Whether a passkey may be this sign-in's second factor: not when the first factor was
    a passkey already (one without user verification would otherwise pass both steps)."""
    return PASSKEY not in signin.amr


def pass_with_code(code: str, *, client_address: str | None) -> str:
    """Check ``code`` (TOTP or recovery code) for the pending sign-in and start its session;
    return where the browser goes. Raises ``WrongCode`` or ``AuthError``; attempts are
    counted per user and per ``client_address``."""
    signin = _held()
    try:
        counted = _count_attempt(signin.user_id, client_address)
    except TooManyCodes:
        pending_signin.drop()
        raise AuthError(
            "SecondFactorThrottled", f"user {signin.user_id}: too many wrong codes"
        ) from None
    _spend(signin)
    factor = _check(signin.user_id, code, counted, recovery=True)
    return start_session(_with(signin, factor))


def pass_with_passkey(signin: Signin) -> str:
    """Start the session of ``signin`` with a passkey of its user as the second factor;
    ``SecondFactorPasskey`` when the first factor was a passkey (see ``passkey_may_pass``)."""
    if not passkey_may_pass(signin):
        raise AuthError("SecondFactorPasskey", "a passkey cannot be both factors without uv")
    _spend(signin)
    return start_session(_with(signin, PASSKEY))


def step_up_with_code(session: AuthSession, code: str, *, client_address: str | None) -> None:
    """Confirm it is the session's person with their authenticator app's code (recovery
    codes are for a lost phone at sign-in, not spent on confirmations). Raises ``WrongCode``
    or ``TooManyCodes``."""
    user_id = session.user.id
    factor = _check(user_id, code, _count_attempt(user_id, client_address), recovery=False)
    record_authentication(session, (factor, verification.MFA))


def _held() -> Signin:
    """This browser's pending sign-in, read from its cookie alone (no database use)."""
    signin = pending_signin.pending()
    if signin is None:
        pending_signin.drop()
        raise AuthError("SecondFactorExpired", "no pending sign-in in this browser")
    return signin


def _require_user(user_id: int) -> None:
    if db.session.get(User, user_id) is None:
        pending_signin.drop()
        raise AuthError("SecondFactorExpired", f"user {user_id} no longer exists")


def _spend(signin: Signin) -> None:
    """Spend the pending sign-in; ``SecondFactorExpired`` when it was passed already."""
    if not pending_signin.spend(signin):
        pending_signin.drop()
        trail.record(
            trail.Event.SIGNIN,
            user_id=signin.user_id,
            provider=signin.provider,
            error="SecondFactorExpired",
        )
        raise AuthError("SecondFactorExpired", f"user {signin.user_id}: passed already")


def _with(signin: Signin, factor: str) -> Signin:
    return replace(signin, amr=verification.with_factor(signin.amr, factor))


def _count_attempt(user_id: int, client_address: str | None) -> throttles.Counted:
    """Count a code's attempt for the user and the client address; ``TooManyCodes`` once a
    limit is reached. Call it before the request's first database use (SQLite: the request
    then holds the write lock the counter would wait for)."""
    conf = current_settings()
    counted = throttles.admit(
        [
            (f"second-factor-user:{user_id}", conf.second_factor_user_limit),
            (
                f"second-factor-ip:{throttles.client_network(client_address)}",
                conf.second_factor_ip_limit,
            ),
        ]
    )
    if counted is None:
        trail.record(
            trail.Event.CODE_LOCKOUT,
            user_id=user_id,
            error="SecondFactorThrottled",
            detail={"code": "second-factor"},
        )
        raise TooManyCodes()
    return counted


def _check(user_id: int, code: str, counted: throttles.Counted, *, recovery: bool) -> str:
    """Check the code of an attempt ``_count_attempt`` counted; a right one gives its count
    back."""
    _require_user(user_id)
    factor = verification.check_code(user_id, code[:64], recovery=recovery)
    if factor is None:
        trail.record(
            trail.Event.CODE_FAILED,
            user_id=user_id,
            error=trail.WRONG_CODE,
            detail={"code": "second-factor"},
        )
        raise WrongCode(throttles.left(counted))
    if factor == verification.RECOVERY_CODE:
        # Which code it was stays untold (not even its hash); how many are left is told.
        trail.record(
            trail.Event.RECOVERY_CODE_USED,
            user_id=user_id,
            detail={"left": recovery_codes.remaining(user_id)},
        )
    throttles.release(counted, with_request=True)
    return factor
