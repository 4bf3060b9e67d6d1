"""The user's passkeys on the account page: renaming one, removing one. (Adding one is a
WebAuthn ceremony: webapp/auth/flows/passkey.py.)
"""

from __future__ import annotations

from webapp.account.flows.recent_signin import require_recent
from webapp.account.flows.ways_in import (
    LAST_METHOD,
    NOT_FOUND,
    PasskeyInfo,
    accounts_of,
    leaves_a_method,
    locked_user,
    passkeys_of,
    passkeys_offered,
)
from webapp.auth import audit, notices
from webapp.auth.errors import AccountError
from webapp.auth.flows.passkey import PROVIDER_ID as PASSKEY_PROVIDER
from webapp.auth.passkeys import clean_name
from webapp.auth.sessions import AuthSession
from webapp.extensions import db
from webapp.i18n import gettext
from webapp.models import Authenticator


def rename_passkey(*, user_id: int, passkey_id: int, name: str) -> PasskeyInfo:
    """Give one of the user's passkeys a new name (1 to 64 characters, trimmed)."""
    chosen = clean_name(name)
    if chosen is None:
        raise AccountError("InvalidName")
    passkey = _passkey(user_id, passkey_id)
    passkey.name = chosen
    return PasskeyInfo.of(passkey)


def remove_passkey(*, user_id: int, passkey_id: int, current: AuthSession) -> PasskeyInfo:
    """Remove one of the user's passkeys; refuse to remove the last way to sign in.

    Needs a recent sign-in, as unlinking a provider does: an old stolen cookie must not
    remove the owner's ways in.
    """
    require_recent(current)
    user = locked_user(user_id)
    if user is None:
        raise AccountError(NOT_FOUND, gettext("This account no longer exists."))
    passkey = _passkey(user_id, passkey_id)
    if passkeys_offered() and not leaves_a_method(user, accounts_of(user_id), passkeys_of(user_id)):
        raise AccountError(
            LAST_METHOD,
            gettext(
                "“%(name)s” is your only way to sign in, so it cannot be removed. Add another "
                "passkey or link a provider first.",
                name=passkey.name,
            ),
        )
    db.session.delete(passkey)
    audit.record(
        audit.Event.PASSKEY_REMOVED,
        user_id=user_id,
        provider=PASSKEY_PROVIDER,
        detail={"passkey": passkey.id, "name": passkey.name},
    )
    notices.method_changed(user_id, added=False)
    return PasskeyInfo.of(passkey)


def _passkey(user_id: int, passkey_id: int) -> Authenticator:
    passkey = db.session.get(Authenticator, passkey_id)
    if passkey is None or passkey.user_id != user_id:
        raise AccountError(
            NOT_FOUND, gettext("That passkey is not (or no longer) part of your account.")
        )
    return passkey
