"""``POST signin/<id>`` and ``callback/<id>`` for each kind of provider: read what the request
carries, call the kind's use case in ``webapp.flows.signin``, say what to answer.

Each kind's module has ``signin(provider, …)`` and ``callback(provider, …)`` and returns an
``outcome.Outcome`` (a redirect or a page); ``auth_routes`` turns it into the response. Adding a
kind is a builder in ``webapp.providers`` and a module here, named in ``ADAPTERS``.
"""

from __future__ import annotations

from types import ModuleType

from webapp.providers.base import Provider
from webapp.web.signin import credentials, email, oauth, passkey, saml

#: The adapter of each provider ``type``.
ADAPTERS: dict[str, ModuleType] = {
    "oidc": oauth,
    "oauth": oauth,
    "email": email,
    "credentials": credentials,
    "webauthn": passkey,
    "saml": saml,
}


def adapter_for(provider: Provider) -> ModuleType:
    """The module that signs in through ``provider``'s kind."""
    return ADAPTERS[provider.type]
