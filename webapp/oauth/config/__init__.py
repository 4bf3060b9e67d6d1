"""Configuration of OAuth/OIDC providers: a TOML table or preset, validated into OAuthConfig.

Every mistake raises ConfigError naming the provider and the field, at start-up.
``parse_config`` reads a table section by section (``sections``, ``client_credentials``)
through ``table.Table``, which falls back on the preset's values; ``model`` holds the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.core.email_domains import parse_domain_rule
from webapp.oauth.config import sections
from webapp.oauth.config.client_credentials import client_credentials
from webapp.oauth.config.model import BEARER_MODES, LOGOUT_MODES, OAuthConfig
from webapp.oauth.config.table import FIELDS, Table
from webapp.settings import ConfigError
from webapp.settings.parsers import nearest

__all__ = ["BEARER_MODES", "LOGOUT_MODES", "OAuthConfig", "parse_config"]


def parse_config(entry: Mapping[str, Any]) -> OAuthConfig:
    """Validate one provider declaration (with its preset's defaults); raise ConfigError.

    The sections are read in the order their settings have always been checked in, so that
    of several mistakes the same one is named.
    """
    where = f"provider {entry['id']!r}"
    preset = sections.named_preset(entry, where)
    allowed = FIELDS | set(preset.extra_fields if preset else ())
    unknown = sorted(k for k in entry if k not in allowed and not k.startswith("_"))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}" + nearest(unknown[0], allowed))
    kind = sections.provider_kind(entry, preset, where)
    table = Table(sections.with_tenant_issuer(entry, preset, kind), preset, where, kind)
    allow_insecure = table.flag("allow_insecure")
    discovery = sections.discovery(table, allow_insecure)
    sign_in = sections.sign_in(table)
    features = sections.provider_features(table, allow_insecure)
    client = client_credentials(table)
    bearer = sections.bearer_tokens(table, client.client_id, features["introspection_endpoint"])
    presentation = sections.presentation(table)
    domain_rule = parse_domain_rule(entry, where)
    return OAuthConfig(
        id=entry["id"],
        type=kind,
        client=client,
        scope=table.text("scope", "openid email profile" if kind == "oidc" else None) or "",
        revoke_on_signout=table.flag("revoke_on_signout"),
        allow_insecure=allow_insecure,
        preset=preset,
        domains=domain_rule.domains,
        enforce_domain=domain_rule.enforce,
        **discovery,
        **sign_in,
        **features,
        **bearer,
        **presentation,
    )
