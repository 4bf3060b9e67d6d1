"""What an application embedding the sign-in facility uses: import it from here.

Everything under ``webapp`` other than this package (and ``create_app``) is internal and may
change between releases; these names change only with a CHANGELOG entry.

- ``Auth``: the facility as a Flask extension (``Auth(app)``, or ``Auth()`` then
  ``init_app(app)``); settings from ``app.config`` under the documented names.
- ``AuthHooks`` (with ``UserInfo``): the application's decisions, passed to ``Auth`` (or
  ``create_app``).
- The signals, sent once what they tell of is committed: ``signed_in``, ``signed_out``,
  ``provider_signed_out``, ``user_created``, ``account_linked``, ``session_read``,
  ``revocation_failed``, and ``audit_event`` for every row of the audit trail (its sender
  is the event type, one of ``AuditEvent``).
- ``current_session()``: this request's browser session, or None.
- ``bearer_identity()``: who this request's provider access token signs in, or None.
- ``provider_access_token(user, provider_id)``: a user's live access token at a provider;
  it raises ``NoProviderAccount``, ``RefreshFailed`` or ``ProviderDown``.
- ``csrf``: Flask-WTF's CSRF protection (``csrf.exempt`` for a token-authenticated API).
- ``recent_signin_required`` (optionally ``max_age=``): a view decorator that asks for a
  sign-in or confirmation within AUTH_REAUTH_MAX_AGE; Flask-Login's ``fresh_login_required``
  means the same.
"""

from __future__ import annotations

from webapp.audit.trail import Event as AuditEvent
from webapp.auth.decorators import recent_signin_required
from webapp.auth.extension import Auth
from webapp.core.hooks import (
    AuthHooks,
    UserInfo,
    account_linked,
    audit_event,
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
    "AuditEvent",
    "Auth",
    "AuthHooks",
    "NoProviderAccount",
    "ProviderDown",
    "RefreshFailed",
    "UserInfo",
    "account_linked",
    "audit_event",
    "bearer_identity",
    "csrf",
    "current_session",
    "provider_access_token",
    "provider_signed_out",
    "recent_signin_required",
    "revocation_failed",
    "session_read",
    "signed_in",
    "signed_out",
    "user_created",
]
