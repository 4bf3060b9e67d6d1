"""The passkey provider (type ``webauthn``, id ``passkey``), on with AUTH_PASSKEYS.

The page's script asks ``webauthn-options/passkey`` for a ceremony's options, lets the
browser and authenticator answer, and posts the answer to ``callback/passkey`` with
``action`` (``authenticate`` or ``register``) and ``data`` (the credential as JSON); the
checks and what follows are ``webapp.flows.signin.passkey``.
"""

from __future__ import annotations

from webapp.i18n import N_
from webapp.providers.base import Provider

#: The passkey provider's id, and the ``provider`` of its accounts and audit events.
PROVIDER_ID = "passkey"


class PasskeyProvider(Provider):
    type = "webauthn"


def default_provider() -> PasskeyProvider:
    """The provider AUTH_PASSKEYS turns on."""
    return PasskeyProvider(id=PROVIDER_ID, name=None, default_name=N_("Passkey"))
