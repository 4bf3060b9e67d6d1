"""What an application embedding the sign-in facility uses: import it from here.

Everything under ``webapp`` other than this package (and ``create_app``) is internal and may
change between releases; these names change only with a CHANGELOG entry.

- ``AuthHooks`` (with ``UserInfo``): the application's decisions, passed to ``create_app``.
- The signals, sent once what they tell of is committed: ``signed_in``, ``signed_out``,
  ``provider_signed_out``, ``user_created``, ``account_linked``, ``session_read``,
  ``revocation_failed``.
- ``current_session()``: this request's browser session, or None.
- ``bearer_identity()``: who this request's provider access token signs in, or None.
- ``provider_access_token(user, provider_id)``: a user's live access token at a provider;
  it raises ``NoProviderAccount``, ``RefreshFailed`` or ``ProviderDown``.
- ``csrf``: Flask-WTF's CSRF protection (``csrf.exempt`` for a token-authenticated API).
"""

from __future__ import annotations

from webapp.core.hooks import (
    AuthHooks,
    UserInfo,
    account_linked,
    provider_signed_out,
    revocation_failed,
    session_read,
    signed_in,
    signed_out,
    user_created,
)
from webapp.flows.provider_tokens import (
    NoProviderAccount,
    ProviderDown,
    RefreshFailed,
    provider_access_token,
)
from webapp.sessions.store import current_session
from webapp.web.bearer import bearer_identity
from webapp.web.extensions import csrf

__all__ = [
    "AuthHooks",
    "NoProviderAccount",
    "ProviderDown",
    "RefreshFailed",
    "UserInfo",
    "account_linked",
    "bearer_identity",
    "csrf",
    "current_session",
    "provider_access_token",
    "provider_signed_out",
    "revocation_failed",
    "session_read",
    "signed_in",
    "signed_out",
    "user_created",
]
