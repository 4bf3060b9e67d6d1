"""The providers linked to the account: the one a page names before linking or unlinking
it (where a confirmation leads back to), and unlinking one. Linking itself is the OAuth
round trip (webapp/flows/signin/oauth.py).
"""

from __future__ import annotations

from webapp.audit import trail
from webapp.errors import AccountError
from webapp.flows import notices
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import (
    LAST_METHOD,
    LINKABLE_TYPES,
    NOT_FOUND,
    LinkOption,
    SignInMethod,
    accounts_of,
    follows_address,
    leaves_a_method,
    locked_user,
    passkeys_of,
)
from webapp.flows.provider_tokens import revoke_tokens
from webapp.i18n import gettext
from webapp.providers import provider_name, providers
from webapp.sessions.store import AuthSession
from webapp.storage.db import db
from webapp.storage.models import User

#: Removing the e-mail sign-in that comes with the verified address (it would come back).
EMAIL_KEPT = "EmailSignInKept"


def sign_in_method(*, user_id: int, account_id: int) -> SignInMethod | None:
    """Return one of the user's sign-in methods, or None if it is not theirs (or gone)."""
    user = db.session.get(User, user_id)
    account = next((a for a in accounts_of(user_id) if a.id == account_id), None)
    return SignInMethod.of(account, user) if account is not None and user is not None else None


def link_option(*, user_id: int, provider_id: str) -> LinkOption | None:
    """Return ``provider_id`` as a provider the user can link now, or None."""
    provider = providers().get(provider_id)
    if provider is None or provider.type not in LINKABLE_TYPES:
        return None
    if any(a.provider == provider_id for a in accounts_of(user_id)):
        return None
    return LinkOption(provider.id, provider.name)


def unlink_account(*, user_id: int, account_id: int, current: AuthSession) -> SignInMethod:
    """Remove one of the user's sign-in methods; refuse to remove the last one, and the
    e-mail row of the verified address (removing it would not stop e-mail sign-in).

    Needs a recent sign-in (``reauth``): with an old stolen cookie, removing the owner's
    methods would lock her out for good. The account's tokens are revoked at the provider
    first (a failure there does not stop the unlink).
    """
    require_recent(current)
    user = locked_user(user_id)
    accounts = accounts_of(user_id)
    account = next((a for a in accounts if a.id == account_id), None)
    if user is None or account is None:
        raise AccountError(NOT_FOUND, gettext("That sign-in method is not linked to your account."))
    if follows_address(account, user):
        raise AccountError(
            EMAIL_KEPT,
            gettext(
                "E-mail sign-in comes with your verified address (%(address)s), so it cannot "
                "be removed. Two-step verification makes a link alone not enough.",
                address=user.email,
            ),
        )
    if not leaves_a_method(user, accounts, passkeys_of(user_id)):
        raise AccountError(
            LAST_METHOD,
            gettext(
                "%(provider)s is your only way to sign in, so it cannot be removed. Link "
                "another provider first.",
                provider=provider_name(account.provider),
            ),
        )
    revoke_tokens(account, forget=False)
    db.session.delete(account)
    trail.record(
        trail.Event.ACCOUNT_UNLINKED,
        user_id=user_id,
        provider=account.provider,
        detail={"account": account.id, "type": account.type},
    )
    notices.method_changed(user_id, provider=account.provider, added=False)
    return SignInMethod.of(account, user)
