"""The configured sign-in providers: the kinds there are, and the providers built from the
settings, once at start-up. Data only: signing in through one is ``webapp.web.signin`` and
``webapp.flows.signin``.

``KINDS`` maps each ``type`` a provider table may name to the function that builds it;
adding a kind is a module with a builder and one line here, and its adapter in
``webapp.web.signin``; never a change to the routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from flask import current_app

from webapp.core import urls
from webapp.oauth.client import OAuthClient
from webapp.providers import credentials, email, oauth, passkey, saml
from webapp.providers.base import Provider, refuse_shared_domains
from webapp.settings import ConfigError, Settings

Builder = Callable[[Mapping[str, Any], Settings], Provider]

#: The provider kinds, by the ``type`` a provider table names.
KINDS: dict[str, Builder] = {
    "oidc": oauth.build,
    "oauth": oauth.build,
    "preset": oauth.build,
    "email": email.build,
    "credentials": credentials.build,
    "saml": saml.build,
}


def build_providers(conf: Settings, *, own_mail_transport: bool) -> dict[str, Provider]:
    """Build every configured provider, in configuration order; raise ConfigError.

    ``own_mail_transport``: the application delivers mail itself (``AuthHooks.send_mail``
    was set at start-up), which enables e-mail sign-in as EMAIL_SERVER does.
    """
    kinds: dict[str, Builder] = {
        **KINDS,
        "email": partial(email.build, own_mail_transport=own_mail_transport),
    }
    built: dict[str, Provider] = {}
    for entry in conf.provider_configs:
        kind = entry["type"]
        builder = kinds.get(kind)
        if builder is None:
            known = ", ".join(sorted(kinds))
            raise ConfigError(f"provider {entry['id']!r}: unknown type {kind!r} (known: {known})")
        built[entry["id"]] = builder(entry, conf)
    refuse_shared_domains(built)
    mail_delivered = conf.email_server is not None or own_mail_transport
    if (
        "email" not in built
        and not any(p.type == "email" for p in built.values())
        and (mail_delivered or (conf.is_development and not conf.provider_configs))
    ):
        # EMAIL_SERVER, or the application's own mail transport, alone enables e-mail
        # sign-in; a fresh development set-up gets it through the outbox, so the first run
        # can sign in by e-mail with no mail server.
        built["email"] = email.default_provider(conf, own_mail_transport=own_mail_transport)
    if conf.demo_credentials and not any(p.type == "credentials" for p in built.values()):
        built["demo"] = credentials.demo_provider()
    if conf.passkeys:
        # AUTH_PASSKEYS turns passkeys on (Auth.js's provider ``passkey``, type webauthn).
        if "passkey" in built:
            raise ConfigError("provider id 'passkey' is taken by passkeys (AUTH_PASSKEYS)")
        built["passkey"] = passkey.default_provider()
    return built


def refuse_serving_without_methods(built: Mapping[str, Provider], conf: Settings) -> None:
    """Stop a production server that has no way to sign in: its sign-in page would tell
    people to read the README. (A command, ``flask auth migrate``, needs none.)"""
    if not built and not conf.is_development:
        raise ConfigError(
            "no sign-in method is configured: set EMAIL_SERVER for e-mail sign-in, or"
            " declare providers in AUTH_CONFIG or AUTH_<PRESET>_ID (README, Providers)"
        )


def describe_methods(
    built: Mapping[str, Provider], conf: Settings, *, own_mail_transport: bool
) -> str:
    """One line for the start-up log: the sign-in methods that are on, and, when e-mail
    sign-in is not among them, why (declaring any provider turns off the development
    outbox's e-mail sign-in, which people who signed up by e-mail would miss)."""
    methods = ", ".join(f"{pid} ({p.type})" for pid, p in built.items()) or "none"
    if any(p.type == "email" for p in built.values()):
        return f"sign-in methods: {methods}"
    why = "no EMAIL_SERVER"
    if conf.is_development and conf.provider_configs and not own_mail_transport:
        why += (
            ", and providers are declared, none of type email (the development outbox"
            " stands in only when none is)"
        )
    return f"sign-in methods: {methods}; e-mail sign-in is off: {why}"


def oauth_client(provider_id: str) -> OAuthClient | None:
    """Return the protocol client of an OAuth/OIDC provider (None for other kinds or ids)."""
    provider = providers().get(provider_id)
    return provider.client if isinstance(provider, oauth.OAuthProvider) else None


def providers_body() -> str:
    """The body of ``GET providers``: the same for every request to one base URL, so made
    once per base URL (one, unless development links follow the browser's loopback name)."""
    base = urls.base_url()
    bodies: dict[str, str] = current_app.extensions.setdefault("webapp.providers_json", {})
    body = bodies.get(base)
    if body is None:
        entries = {pid: p.public_json() for pid, p in providers().items()}
        # Compact, as jsonify sends JSON outside debug mode.
        body = bodies[base] = current_app.json.dumps(entries, separators=(",", ":")) + "\n"
    return body


def providers() -> dict[str, Provider]:
    """Return the running application's providers, keyed by id."""
    built: dict[str, Provider] = current_app.extensions["webapp.providers"]
    return built


def provider_name(provider_id: str) -> str:
    """The name people see for ``provider_id`` (the id itself if it is no longer configured)."""
    provider = providers().get(provider_id)
    return provider.name if provider is not None else provider_id
