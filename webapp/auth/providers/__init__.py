"""Sign-in providers: the common interface, and the registry built from the settings.

Each provider kind lives in its own module and registers a builder for its ``type``;
adding a kind (e-mail, OAuth, OIDC) is a new module, not a change to the views.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flask import current_app

from webapp.auth import urls
from webapp.settings import ConfigError, Settings


@dataclass(frozen=True)
class Redirect:
    """Send the browser to ``url``."""

    url: str


@dataclass(frozen=True)
class Page:
    """Render ``template`` with ``context``."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    status: int = 200


Outcome = Redirect | Page


class Provider:
    """A way to sign in. Subclasses implement ``signin`` and ``callback``."""

    #: oidc, oauth, email or credentials, as shown in ``GET providers``.
    type: str = ""
    #: Whether a POST to the callback must carry a CSRF token (not for form_post returns
    #: from an identity provider, which are cross-site by design and checked by state).
    callback_needs_csrf: bool = True

    def __init__(self, *, id: str, name: str) -> None:
        self.id = id
        self.name = name

    def public_json(self) -> dict[str, str]:
        """Return this provider's entry in ``GET providers``."""
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "signinUrl": urls.auth_url(f"signin/{self.id}"),
            "callbackUrl": urls.auth_url(f"callback/{self.id}"),
        }

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        """Handle ``POST signin/<id>``."""
        raise NotImplementedError

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        """Handle ``GET``/``POST callback/<id>``."""
        raise NotImplementedError


Builder = Callable[[Mapping[str, Any], Settings], Provider]
_KINDS: dict[str, Builder] = {}


def register_kind(type_name: str, builder: Builder) -> None:
    """Make ``type = "<type_name>"`` in the configuration build providers with ``builder``."""
    _KINDS[type_name] = builder


def build_providers(conf: Settings) -> dict[str, Provider]:
    """Build every configured provider, in configuration order; raise ConfigError."""
    # Importing a kind's module registers it (oauth: oidc, oauth and preset).
    from webapp.auth.providers import credentials, email, oauth  # noqa: F401

    built: dict[str, Provider] = {}
    for entry in conf.provider_configs:
        kind = entry["type"]
        builder = _KINDS.get(kind)
        if builder is None:
            known = ", ".join(sorted(_KINDS))
            raise ConfigError(f"provider {entry['id']!r}: unknown type {kind!r} (known: {known})")
        built[entry["id"]] = builder(entry, conf)
    if (
        "email" not in built
        and not any(p.type == "email" for p in built.values())
        and (conf.email_server or (conf.is_development and not conf.provider_configs))
    ):
        # EMAIL_SERVER alone enables e-mail sign-in; a fresh development set-up gets it
        # through the outbox, so the first run can sign in by e-mail with no mail server.
        built["email"] = email.default_provider(conf)
    if conf.demo_credentials and not any(p.type == "credentials" for p in built.values()):
        built["demo"] = credentials.demo_provider()
    return built


def providers() -> dict[str, Provider]:
    """Return the running application's providers, keyed by id."""
    built: dict[str, Provider] = current_app.extensions["webapp.providers"]
    return built
