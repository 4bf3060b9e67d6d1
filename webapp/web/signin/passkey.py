"""Signing in with a passkey: the page's script posts the ceremony's answer to
``callback/passkey`` with ``action`` (``authenticate`` or ``register``) and ``data`` (the
credential as JSON); ``webauthn-options/passkey`` (in ``auth_routes``) starts a ceremony."""

from __future__ import annotations

from collections.abc import Mapping

from flask import flash, request

from webapp.errors import AuthError
from webapp.flows.signin.passkey import (
    AUTHENTICATE,
    REGISTER,
    complete_authentication,
    complete_registration,
)
from webapp.i18n import gettext
from webapp.providers.passkey import PasskeyProvider
from webapp.web.signin.outcome import Outcome, Redirect


def signin(
    provider: PasskeyProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    # A passkey sign-in is the page script's ceremony; there is nothing to start here.
    raise AuthError("PasskeySignin", "POST signin/passkey: passkeys sign in by script")


def callback(
    provider: PasskeyProvider,
    *,
    method: str,
    args: Mapping[str, str],
    form: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    if method != "POST":
        raise AuthError("PasskeySignin", "passkey callback needs POST")
    action = form.get("action")
    # Bounded by the request's size limit (64 KiB); the flow refuses more than 16.
    data = str(form.get("data", ""))
    if action == AUTHENTICATE:
        return Redirect(
            complete_authentication(
                data=data, callback_url=callback_url, client_address=request.remote_addr
            )
        )
    if action == REGISTER:
        url = complete_registration(
            data=data, name=str(form.get("name", "")), client_address=request.remote_addr
        )
        # Shown in the account page's passkeys section (webapp/web/account_routes.py).
        flash(gettext("Passkey added. You can now sign in with it."), "success passkeys")
        return Redirect(url)
    raise AuthError("PasskeySignin", "passkey callback without a known action")
