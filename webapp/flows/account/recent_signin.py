"""Confirming it is you: the recent sign-in that changes to the account need (with an old
stolen cookie alone they are refused), and the sign-ins that give one on
``/account/confirm``.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.errors import AccountError
from webapp.flows.account.ways_in import (
    LINKABLE_TYPES,
    account_gone,
    accounts_of,
    email_signin,
)
from webapp.i18n import ngettext
from webapp.providers import providers
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession
from webapp.storage.db import db
from webapp.storage.models import User

REAUTH_REQUIRED = "RecentSignInRequired"


def require_recent(current: AuthSession) -> None:
    """Refuse with ``REAUTH_REQUIRED`` unless the session proved itself recently."""
    if not reauthentication.is_recent(current):
        raise AccountError(
            REAUTH_REQUIRED,
            ngettext(
                "For your safety, this needs a sign-in in the last %(num)d minute. Confirm it "
                "is you, and you will be brought back here.",
                "For your safety, this needs a sign-in in the last %(num)d minutes. Confirm it "
                "is you, and you will be brought back here.",
                reauthentication.window_minutes(),
            ),
        )


@dataclass(frozen=True)
class ConfirmMethod:
    """One way the user can confirm it is them: a sign-in with a method they already have."""

    kind: str
    provider_id: str
    name: str
    #: Pre-filled identifier: the address for e-mail, the account's subject for credentials.
    hint: str | None = None
    #: The credentials form's fields (name, label, type), for ``kind == "credentials"``.
    fields: tuple[tuple[str, str, str], ...] = ()


def confirmation_methods(*, user_id: int) -> list[ConfirmMethod]:
    """Return the sign-ins that confirm this user: their linked providers and, for a
    verified address, an e-mail link or code (an unverified one proves nothing)."""
    user = db.session.get(User, user_id)
    if user is None:
        raise account_gone()
    configured = providers()
    methods = []
    for account in accounts_of(user_id):
        provider = configured.get(account.provider)
        if provider is None:
            continue
        if provider.type in LINKABLE_TYPES:
            methods.append(ConfirmMethod("oauth", provider.id, provider.name))
        elif provider.type == "credentials":
            fields = tuple((f.name, f.shown_label, f.type) for f in getattr(provider, "fields", ()))
            methods.append(
                ConfirmMethod(
                    "credentials", provider.id, provider.name, account.provider_account_id, fields
                )
            )
    email = email_signin(user)
    if email is not None:
        methods.append(
            ConfirmMethod("email", email.provider_id, email.provider_name, email.address)
        )
    return methods
