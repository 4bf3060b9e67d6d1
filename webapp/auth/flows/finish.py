"""Finishing a sign-in, whatever the provider: the sign-in hook, a fresh session, signals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp import transactions
from webapp.auth.errors import AuthError
from webapp.auth.flows.linking import Resolved
from webapp.auth.hooks import current_hooks, signed_in
from webapp.auth.redirects import resolve_redirect
from webapp.auth.sessions import (
    AuthSession,
    ProviderSession,
    create_session,
    end_current_session,
)


def finish_signin(
    resolved: Resolved,
    *,
    provider: str,
    callback_url: str | None,
    profile: Mapping[str, Any] | None = None,
    provider_session: ProviderSession | None = None,
) -> str:
    """Run the sign-in hook and replace this browser's session with a new one.

    Returns where to send the browser. A refusal by the hook (``AccessDenied``, or a URL to
    go to instead) discards everything the sign-in wrote: no user, account or session is
    left behind. Any session the browser already had is deleted first: every sign-in gets a
    new token (no fixation). ``signed_in`` is sent once the session is committed.
    """
    hook = current_hooks().signin
    if hook is not None:
        verdict = hook(user=resolved.user, provider=provider, profile=dict(profile or {}))
        if verdict is False:
            raise AuthError("AccessDenied", f"sign-in hook refused user {resolved.user.id}")
        if isinstance(verdict, str):
            transactions.discard()
            return verdict
    end_current_session()
    session: AuthSession = create_session(
        resolved.user.id, provider=provider, provider_session=provider_session
    )
    transactions.on_commit(
        lambda: signed_in.send(
            user=session.user, provider=provider, is_new_user=resolved.is_new_user
        )
    )
    return resolve_redirect(callback_url)
