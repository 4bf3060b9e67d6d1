"""The user's passkeys on the account page: the one a page names before removing it,
renaming one, removing one. (Adding one is a WebAuthn ceremony:
webapp/flows/signin/passkey.py.)
"""

from __future__ import annotations

from webapp.audit import trail
from webapp.core.names import clean_name
from webapp.errors import AccountError
from webapp.flows import notices
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import (
    LAST_METHOD,
    NOT_FOUND,
    PasskeyInfo,
    account_gone,
    accounts_of,
    leaves_a_method,
    locked_user,
    passkeys_of,
    passkeys_offered,
)
from webapp.i18n import gettext
from webapp.passkeys.relying_party import NAME_MAX
from webapp.providers.passkey import PROVIDER_ID as PASSKEY_PROVIDER
from webapp.sessions.store import AuthSession
from webapp.storage.db import db
from webapp.storage.models import Authenticator


def find_passkey(*, user_id: int, passkey_id: int) -> PasskeyInfo | None:
    """Return one of the user's passkeys (for the page that asks before removing it), or
    None if it is not theirs (or gone)."""
    passkey = db.session.get(Authenticator, passkey_id)
    return PasskeyInfo.of(passkey) if passkey is not None and passkey.user_id == user_id else None


def rename_passkey(*, user_id: int, passkey_id: int, name: str) -> PasskeyInfo:
    """Give one of the user's passkeys a new name (1 to 64 characters, trimmed)."""
    chosen = clean_name(name, longest=NAME_MAX)
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
        raise account_gone()
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
    trail.record(
        trail.Event.PASSKEY_REMOVED,
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
