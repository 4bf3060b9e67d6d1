"""OAuth 2 and OpenID Connect providers (kinds oidc, oauth, preset): the request's adapter.

The provider holds its configuration and the protocol client (``oauth.client``); signing
in and the callback are ``webapp.auth.flows.oauth``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import url_for

from webapp.auth.flows.oauth import complete_oauth_callback, start_oauth_signin
from webapp.auth.oauth.client import OAuthClient
from webapp.auth.oauth.config import OAuthConfig, parse_config
from webapp.auth.providers.base import Outcome, Provider, Redirect
from webapp.settings import Settings


class OAuthProvider(Provider):
    """An OAuth 2 or OpenID Connect identity provider."""

    # form_post callbacks are cross-site POSTs by design; state protects them instead.
    callback_needs_csrf = False

    def __init__(self, config: OAuthConfig, conf: Settings) -> None:
        super().__init__(id=config.id, name=config.name)
        self.type = config.type
        self.config = config
        self.client = OAuthClient(config, conf)

    @property
    def logo_url(self) -> str | None:
        logo = self.config.logo
        if logo is None:
            return None
        return logo if logo.startswith("/") else url_for("static", filename=logo)

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        return Redirect(start_oauth_signin(self.client, query=query, callback_url=callback_url))

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        return Redirect(complete_oauth_callback(self.client, method=method, args=args, form=form))


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    """Build a provider from its TOML table or ``AUTH_<PRESET>_*``; raise ConfigError."""
    return OAuthProvider(parse_config(entry), conf)
