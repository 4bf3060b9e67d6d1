"""Linking a provider to the signed-in person: a sign-in through an OAuth/OIDC provider
made while a session is present (django-allauth calls it "connect").

The round trip is the sign-in's own (``webapp.flows.signin.oauth``); what makes it a link
is the session, and what guards it are the two re-authentication checks here. A session
older than ``AUTH_REAUTH_MAX_AGE`` must not link the identity of whoever holds its cookie:
- before leaving for the provider, an old session with no account there is sent to confirm
  it is them first (``/account/confirm``, back to ``/account/link/<id>``);
- on the way back, an identity that no user has yet would be linked to the session's user:
  an old session is sent to confirm, and nothing is written. An identity the user already
  has is how they confirm; one another user has is refused by the linking rules
  (``webapp.flows.signin.identity``: ``OAuthAccountNotLinked``).
The link itself, the ``accounts`` row and ``account_linked``, is ``identity.resolve_user``
with the session's user.
"""

from __future__ import annotations

from sqlalchemy import select

from webapp.core import urls
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession
from webapp.storage.db import db
from webapp.storage.models import Account


def confirmation_before_leaving(session: AuthSession | None, provider_id: str) -> str | None:
    """Where an old session goes to confirm it is them before a sign-in through
    ``provider_id`` leaves for the provider, or None when it may go."""
    if session is None or reauthentication.is_recent(session):
        return None
    has_account = db.session.execute(
        select(Account.id).where(
            Account.user_id == session.user.id, Account.provider == provider_id
        )
    ).first()
    return None if has_account is not None else _confirmation(provider_id)


def confirmation_on_return(
    session: AuthSession | None, provider_id: str, subject: str
) -> str | None:
    """Where an old session goes to confirm it is them before (``provider_id``,
    ``subject``), an identity no user has, is linked to it; None when the sign-in may go
    on (no session, a recent one, or an identity someone has)."""
    if session is None or reauthentication.is_recent(session):
        return None
    owner = db.session.execute(
        select(Account.user_id).where(
            Account.provider == provider_id, Account.provider_account_id == subject
        )
    ).scalar_one_or_none()
    return _confirmation(provider_id) if owner is None else None


def _confirmation(provider_id: str) -> str:
    return urls.origin() + reauthentication.confirm_url(f"/account/link/{provider_id}")
