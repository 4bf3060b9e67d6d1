"""Finishing a sign-in, whatever the provider: the sign-in hook, a fresh session, signals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.auth.errors import AuthError
from webapp.auth.flows.linking import Resolved
from webapp.auth.hooks import current_hooks, signed_in
from webapp.auth.redirects import resolve_redirect
from webapp.auth.sessions import AuthSession, create_session, end_current_session
from webapp.extensions import db


def finish_signin(
    resolved: Resolved,
    *,
    provider: str,
    callback_url: str | None,
    profile: Mapping[str, Any] | None = None,
    provider_sid: str | None = None,
) -> str:
    """Run the sign-in hook, replace this browser's session with a new one, and commit.

    Returns where to send the browser. The hook runs before anything is committed, so a
    refusal (``AccessDenied``) leaves no user, account or session behind. Any session the
    browser already had is deleted first: every sign-in gets a new token (no fixation).
    """
    hook = current_hooks().signin
    if hook is not None:
        verdict = hook(user=resolved.user, provider=provider, profile=dict(profile or {}))
        if verdict is False:
            raise AuthError("AccessDenied", f"sign-in hook refused user {resolved.user.id}")
        if isinstance(verdict, str):
            db.session.rollback()
            return verdict
    end_current_session()
    session: AuthSession = create_session(
        resolved.user.id, provider=provider, provider_sid=provider_sid
    )
    db.session.commit()
    signed_in.send(user=session.user, provider=provider, is_new_user=resolved.is_new_user)
    return resolve_redirect(callback_url)
