"""The passkey provider (type ``webauthn``, id ``passkey``), on with AUTH_PASSKEYS.

The page's script asks ``webauthn-options/passkey`` for a ceremony's options, lets the
browser and authenticator answer, and posts the answer to ``callback/passkey`` with
``action`` (``authenticate`` or ``register``) and ``data`` (the credential as JSON); the
checks and what follows are ``webapp.auth.flows.passkey``.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import flash

from webapp.auth.errors import AuthError
from webapp.auth.flows.passkey import (
    AUTHENTICATE,
    PROVIDER_ID,
    REGISTER,
    complete_authentication,
    complete_registration,
)
from webapp.auth.providers.base import Outcome, Provider, Redirect
from webapp.i18n import gettext


class PasskeyProvider(Provider):
    type = "webauthn"

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        # A passkey sign-in is the page script's ceremony; there is nothing to start here.
        raise AuthError("PasskeySignin", "POST signin/passkey: passkeys sign in by script")

    def callback(
        self,
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
            return Redirect(complete_authentication(data=data, callback_url=callback_url))
        if action == REGISTER:
            url = complete_registration(data=data, name=str(form.get("name", "")))
            # Shown in the account page's passkeys section (webapp/account/views.py).
            flash(gettext("Passkey added. You can now sign in with it."), "success passkeys")
            return Redirect(url)
        raise AuthError("PasskeySignin", "passkey callback without a known action")


def default_provider() -> PasskeyProvider:
    """The provider AUTH_PASSKEYS turns on."""
    return PasskeyProvider(id=PROVIDER_ID, name="Passkey")
