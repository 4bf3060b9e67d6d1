"""SAML 2.0 identity providers (kind saml): the configuration (``webapp.saml.config``) and
our service provider's protocol side (``webapp.saml.service_provider``, on pysaml2, the
``saml`` extra); signing in and the assertion consumer are ``webapp.flows.signin.saml``.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webapp.core.email_domains import DomainRule
from webapp.providers.base import Provider, refuse_unknown_fields
from webapp.saml import idp_metadata, keys
from webapp.saml.assertion import IdpUnavailable
from webapp.saml.config import FIELDS, SamlConfig, parse_config
from webapp.settings import ConfigError, Settings

if TYPE_CHECKING:
    from webapp.saml.service_provider import ServiceProvider


class SamlProvider(Provider):
    """A SAML 2.0 identity provider, and our service provider for it."""

    type = "saml"
    # The IdP's HTTP-POST to the assertion consumer is cross-site by design and carries no
    # CSRF token; the InResponseTo bound to this browser's sealed cookie protects it.
    callback_needs_csrf = False

    def __init__(self, config: SamlConfig, service_provider: ServiceProvider) -> None:
        super().__init__(
            id=config.id,
            name=config.name,
            domain_rule=DomainRule(config.domains, config.enforce_domain),
        )
        self.config = config
        self.service_provider = service_provider


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    """Build a provider from its TOML table; raise ConfigError."""
    refuse_unknown_fields(entry, FIELDS)
    config = parse_config(entry)
    if not conf.is_development and not conf.is_https:
        # The request cookies are SameSite=None, so Secure; the IdP posts back to us.
        raise ConfigError(f"provider {config.id!r}: type saml needs an https AUTH_URL")
    if importlib.util.find_spec("saml2") is None:
        raise ConfigError(
            f"provider {config.id!r}: type saml needs pysaml2: install webapp-signin[saml]"
        )
    # xmlschema (pysaml2's schema checks) logs at INFO, as pysaml2 is imported, that a
    # schema is "already loaded": nothing an operator acts on. Quietened only here, when an
    # app has a SAML provider, not for every application that imports this package.
    logging.getLogger("xmlschema").setLevel(logging.WARNING)
    # Imported here: pysaml2 is an extra, and an installation without it runs every other
    # kind of provider.
    from webapp.saml.service_provider import ServiceProvider

    key_pair = keys.load_or_make(
        config.id, config.sp_key_file, config.sp_cert_file, development=conf.is_development
    )
    source = idp_metadata.source(config, (conf.http_connect_timeout, conf.http_read_timeout))
    service_provider = ServiceProvider(
        config, auth_url=conf.auth_url, keys=key_pair, idp_metadata=source
    )
    if config.idp_metadata_file is not None:
        # A file is there at start-up: one that cannot be used (unreadable, no IdP, its
        # signature not good) stops start-up, rather than every sign-in after it.
        try:
            service_provider.load_now()
        except IdpUnavailable as exc:
            raise ConfigError(f"provider {config.id!r}: idp_metadata_file: {exc}") from None
    return SamlProvider(config, service_provider)
