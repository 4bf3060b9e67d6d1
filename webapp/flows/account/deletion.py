"""Deleting the account: the user with their ways in, sessions and pending e-mail links;
their earlier events stay, naming nobody.
"""

from __future__ import annotations

from sqlalchemy import delete, or_

from webapp.audit import trail
from webapp.errors import AccountError
from webapp.flows import notices
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import account_gone, accounts_of
from webapp.flows.provider_tokens import revoke_tokens
from webapp.i18n import gettext
from webapp.sessions.store import AuthSession, end_current_session
from webapp.storage.database import execute_counting
from webapp.storage.db import db
from webapp.storage.models import (
    Account,
    Authenticator,
    RecoveryCode,
    Session,
    TotpAuthenticator,
    User,
    VerificationToken,
)

#: What the person must type to confirm deleting the account.
DELETE_CONFIRMATION = "DELETE"

NOT_CONFIRMED = "ConfirmationRequired"


def delete_account(*, user_id: int, current: AuthSession, confirmation: str) -> None:
    """Delete the user with their accounts, sessions and pending e-mail links.

    Needs the typed confirmation and a sign-in within the re-authentication window, so an
    unattended browser or a stolen old cookie cannot delete the account. Every account's
    tokens are revoked at its provider first (failures there do not stop the deletion).
    """
    if confirmation.strip() != DELETE_CONFIRMATION:
        raise AccountError(
            NOT_CONFIRMED, gettext("Type %(word)s to confirm.", word=DELETE_CONFIRMATION)
        )
    require_recent(current)
    user = db.session.get(User, user_id)
    if user is None:
        raise account_gone()
    for account in accounts_of(user_id):
        revoke_tokens(account, forget=False)
    notices.account_deleted(user)
    this_one = end_current_session()
    # Explicit deletes rather than relying on ON DELETE CASCADE: the outcome must not
    # depend on a connection's foreign-key setting (SQLite's is per connection).
    sessions = execute_counting(delete(Session).where(Session.user_id == user_id))
    db.session.execute(delete(Account).where(Account.user_id == user_id))
    for factor in (Authenticator, TotpAuthenticator, RecoveryCode):
        db.session.execute(delete(factor).where(factor.user_id == user_id))
    # Its pending sign-ins, and its pending change of address.
    db.session.execute(
        delete(VerificationToken).where(
            or_(VerificationToken.identifier == user.email, VerificationToken.user_id == user_id)
        )
    )
    db.session.execute(delete(User).where(User.id == user_id))
    # The user's earlier events stay, naming nobody (ON DELETE SET NULL); this one names the
    # address it had, by its keyed hash, for an operator who is asked about it.
    trail.record(
        trail.Event.ACCOUNT_DELETED,
        subject=user.email,
        detail={"sessions": sessions + (this_one is not None)},
    )
