"""OAuth 2 and OpenID Connect providers (kinds oidc, oauth, preset): the configuration and
the protocol client (``webapp.oauth.client``); signing in and the callback are
``webapp.flows.signin.oauth``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.core.email_domains import DomainRule
from webapp.oauth.client import OAuthClient
from webapp.oauth.config import OAuthConfig, parse_config
from webapp.providers.base import Provider
from webapp.settings import Settings
from webapp.ui.assets import static_url


class OAuthProvider(Provider):
    """An OAuth 2 or OpenID Connect identity provider."""

    # form_post callbacks are cross-site POSTs by design; state protects them instead.
    callback_needs_csrf = False

    def __init__(self, config: OAuthConfig, conf: Settings) -> None:
        super().__init__(
            id=config.id,
            name=config.name,
            domain_rule=DomainRule(config.domains, config.enforce_domain),
        )
        self.type = config.type
        self.config = config
        self.client = OAuthClient(config, conf)

    @property
    def logo_url(self) -> str | None:
        logo = self.config.logo
        if logo is None:
            return None
        return logo if logo.startswith("/") else static_url(logo)


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    """Build a provider from its TOML table or ``AUTH_<PRESET>_*``; raise ConfigError."""
    return OAuthProvider(parse_config(entry), conf)
