"""Finishing a sign-in, whatever the provider: the sign-in hook, the second-factor gate, a
fresh session, signals.

Every way in (e-mail link and code, OAuth/OIDC, credentials, device sign-in, passkeys)
ends in ``finish_signin``; it is the one gate. A user with a second factor gets no session
after the first: the sign-in is held (``pending_signin``) until ``flows.second_factor``
passes it to ``start_session``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webapp.audit import trail
from webapp.browser_state import last_provider
from webapp.core import urls
from webapp.core.hooks import current_hooks, signed_in
from webapp.core.redirects import resolve_redirect
from webapp.errors import AuthError
from webapp.flows import notices
from webapp.flows.sso import routing
from webapp.providers import providers
from webapp.second_factor import pending_signin
from webapp.second_factor.pending_signin import Signin
from webapp.second_factor.verification import MFA, has_second_factor
from webapp.sessions.store import (
    AuthSession,
    ProviderSession,
    create_session,
    end_current_session,
)
from webapp.storage import transactions
from webapp.storage.models import User


def finish_signin(
    user: User,
    *,
    is_new_user: bool,
    provider: str,
    amr: Sequence[str],
    callback_url: str | None,
    profile: Mapping[str, Any] | None = None,
    provider_session: ProviderSession | None = None,
) -> str:
    """Run the sign-in hook, then start a session or hold the sign-in for a second factor.

    ``amr`` says how the person proved who they are (``fed``, ``pwd``, ``email``, ``hwk``;
    with ``mfa`` when that was already two factors). Returns where to send the browser. A
    refusal by the hook (``AccessDenied``, or a URL to go to instead) discards everything
    the sign-in wrote: no user, account or session is left behind.
    """
    # Whichever way in found the user (a passkey, an account linked before): an address of
    # a domain with enforce_domain signs in through its provider only.
    routing.refuse_other_ways_in(provider, user.email if user.email_verified else None)
    hook = current_hooks().signin
    if hook is not None:
        verdict = hook(user=user, provider=provider, profile=dict(profile or {}))
        if verdict is False:
            raise AuthError("AccessDenied", f"sign-in hook refused user {user.id}")
        if isinstance(verdict, str):
            transactions.discard()
            return verdict
    signin = Signin(
        user_id=user.id,
        provider=provider,
        callback_url=callback_url,
        amr=tuple(amr),
        is_new_user=is_new_user,
        provider_session=provider_session,
    )
    if MFA not in signin.amr and has_second_factor(user.id):
        # The first factor's writes (a spent e-mail link, refreshed provider tokens) stay;
        # the browser gets no session until the second factor.
        pending_signin.hold(signin)
        return urls.auth_url("second-factor")
    return start_session(signin)


def start_session(signin: Signin) -> str:
    """Replace this browser's session with a new one for ``signin``; return where to go.

    Any session the browser already had is deleted first: every sign-in gets a new token
    (no fixation). ``signed_in`` is sent once the session is committed.
    """
    pending_signin.drop()
    replaced = end_current_session()
    session: AuthSession = create_session(
        signin.user_id,
        provider=signin.provider,
        amr=signin.amr,
        provider_session=signin.provider_session,
    )
    notices.after_signin(signin.user_id, provider=signin.provider, new_user=signin.is_new_user)
    provider = providers().get(signin.provider)
    if provider is not None and provider.type != "webauthn":
        # "Last used" is the chooser's hint for its buttons and forms; a passkey has none.
        last_provider.remember(provider.id)
    trail.record(
        trail.Event.SIGNIN,
        user_id=signin.user_id,
        provider=signin.provider,
        detail={
            "session": session.id,
            "amr": " ".join(signin.amr),
            "new_user": signin.is_new_user,
            # The session this browser had before, ended by this sign-in (no fixation).
            "replaced": replaced.id if replaced else None,
        },
    )
    transactions.on_commit(
        lambda: signed_in.send(
            user=session.user, provider=signin.provider, is_new_user=signin.is_new_user
        )
    )
    return resolve_redirect(signin.callback_url)
