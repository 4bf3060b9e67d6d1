"""Credentials sign-in: the application's ``authorize`` hook checks a form, then a session.

Unlike Auth.js, a successful check creates a database session. Attempts are throttled per
identifier (the first field, usually the e-mail) and client address, counted in the
database before the hook runs (``ratelimit.admit``), so a burst of parallel guesses gets
no more hook calls than the limit; a right answer gives its count back. Once a limit is
reached, attempts are refused without calling the hook, with the same
``CredentialsSignin`` answer, until the window ends (docs/security.md, "Throttles").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial

from webapp.auth import audit, known_browsers, ratelimit
from webapp.auth.addresses import InvalidAddress, normalize_email
from webapp.auth.errors import AuthError
from webapp.auth.flows.finish import finish_signin
from webapp.auth.flows.linking import resolve_user
from webapp.auth.hooks import UserInfo

Authorize = Callable[[Mapping[str, str]], UserInfo | None]


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
    counted = ratelimit.admit_signin(
        "credentials",
        identifier=key,
        address=client_address,
        refused=partial(audit.throttled, subject=identifier or None, provider=provider_id),
    )
    if counted is None:
        raise AuthError("CredentialsSignin", "rate limited")

    info = authorize(submitted)
    if info is None or not (info.subject or info.email):
        audit.record(
            audit.Event.SIGNIN,
            subject=identifier or None,
            provider=provider_id,
            error="CredentialsSignin",
        )
        raise AuthError("CredentialsSignin", "authorize hook rejected the attempt")
    info = dataclasses.replace(info, email=_address(info.email))
    # A right answer was no guess: it gives its count back, and this browser is known.
    ratelimit.release(counted)
    known_browsers.remember(ratelimit.identifier_hash(key))
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
