"""Credentials sign-in: the application's ``authorize`` hook checks a form, then a session.

Unlike Auth.js, a successful check creates a database session. Attempts are throttled per
identifier (the first field, usually the e-mail) and client address, counted in the
database before the hook runs (``throttles.admit``), so a burst of parallel guesses gets
no more hook calls than the limit; a right answer gives its count back. Once a limit is
reached, attempts are refused without calling the hook, with the same
``CredentialsSignin`` answer, until the window ends (docs/security.md, "Throttles").
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Callable, Mapping
from functools import partial

from webapp.audit import throttles, trail
from webapp.browser_state import known_browsers
from webapp.core.hooks import UserInfo, current_hooks
from webapp.errors import AuthError
from webapp.flows.signin.finish import finish_signin
from webapp.flows.signin.identity import resolve_user
from webapp.mail.email_addresses import InvalidAddress, normalize_email
from webapp.providers.credentials import DEMO_PASSWORD, CredentialsProvider

Authorize = Callable[[Mapping[str, str]], UserInfo | None]


def authorize_with(provider: CredentialsProvider) -> Authorize:
    """The check ``provider``'s fields go through: the application's ``authorize`` hook, or
    the development demo's."""
    if provider.demo:
        return _demo_authorize
    hook = current_hooks().authorize
    if hook is None:
        raise AuthError("Configuration", f"credentials provider {provider.id!r} has no hook")
    return hook


def _demo_authorize(form: Mapping[str, str]) -> UserInfo | None:
    """Accept any well-formed address with DEMO_PASSWORD (development only)."""
    try:
        email = normalize_email(form.get("email", ""))
    except InvalidAddress:
        return None
    if not hmac.compare_digest(form.get("password", "").encode(), DEMO_PASSWORD.encode()):
        return None
    return UserInfo(email=email, name=email.split("@", 1)[0], subject=email)


def complete_credentials_signin(
    *,
    provider_id: str,
    submitted: Mapping[str, str],
    identifier: str,
    authorize: Authorize,
    client_address: str | None,
    callback_url: str | None,
) -> str:
    """Check ``submitted`` with ``authorize``; sign the person in; return the redirect URL.

    ``identifier`` is what the throttles count (the first field as typed). Raises
    ``CredentialsSignin`` when a limit is reached or the hook says no.
    """
    key = f"{provider_id}:{identifier.strip().lower()}"
    counted = throttles.admit_signin(
        "credentials",
        identifier=key,
        address=client_address,
        refused=partial(trail.throttled, subject=identifier or None, provider=provider_id),
    )
    if counted is None:
        raise AuthError("CredentialsSignin", "rate limited")

    info = authorize(submitted)
    if info is None or not (info.subject or info.email):
        trail.record(
            trail.Event.SIGNIN,
            subject=identifier or None,
            provider=provider_id,
            error="CredentialsSignin",
        )
        raise AuthError("CredentialsSignin", "authorize hook rejected the attempt")
    info = dataclasses.replace(info, email=_address(info.email))
    # A right answer was no guess: it gives its count back, and this browser is known.
    throttles.release(counted)
    known_browsers.remember(throttles.identifier_hash(key))
    resolved = resolve_user(
        provider=provider_id,
        provider_type="credentials",
        subject=str(info.subject or info.email),
        info=info,
        current_user_id=None,
        # The application's own hook vouched for this person (an address links only if
        # the hook also says it is verified: linking's rules).
        allow_email_linking=True,
        create_error="CredentialsSignin",
    )
    return finish_signin(
        resolved.user,
        is_new_user=resolved.is_new_user,
        provider=provider_id,
        amr=("pwd",),
        callback_url=callback_url,
    )


def _address(value: str | None) -> str | None:
    """The hook's address in our normal form. One we do not accept fails the sign-in: the
    application vouched for it, and a user row must never hold it (it would become a
    mail header)."""
    if value is None:
        return None
    try:
        return normalize_email(value)
    except InvalidAddress as exc:
        raise AuthError(
            "CredentialsSignin", f"authorize hook returned an address we do not accept: {exc}"
        ) from None
