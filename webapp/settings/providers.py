"""The identity providers: which are declared, and the bounds on what a sign-in through one
may cost (timeouts, attempts and requests per client address, cached answers).

Each declaration is only checked for a usable id and a type here; each provider kind
validates the rest of its own entries (``webapp.providers``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from webapp.settings.model import ConfigError, Settings
from webapp.settings.parsers import opt_str, parse_bool, parse_int, parse_seconds
from webapp.settings.sources import Sources

PROVIDER_ID_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
#: Presets that ``AUTH_<PRESET>_ID`` (``-`` written as ``_``) enables from the environment.
PRESET_IDS = (
    "github",
    "google",
    "gitlab",
    "microsoft-entra-id",
    "apple",
    "discord",
    "slack",
    "keycloak",
    "okta",
    "auth0",
    "authentik",
    "zitadel",
    "cognito",
    "twitch",
    "linkedin",
    "facebook",
    "twitter",
    "bitbucket",
)


def read_providers(sources: Sources, development: bool) -> dict[str, Any]:
    """The provider declarations (TOML tables, then presets from the environment), and the
    development demo sign-in."""
    get = sources.get
    demo = parse_bool("AUTH_DEMO_CREDENTIALS", get("AUTH_DEMO_CREDENTIALS", "demo_credentials"))
    if demo is None:
        demo = development
    if demo and not development:
        raise ConfigError(
            "AUTH_DEMO_CREDENTIALS accepts any address with a fixed password and cannot be "
            "enabled outside development (APP_ENV=development)"
        )
    provider_configs = tuple(_secret_from_env(p, sources.env) for p in sources.providers) + tuple(
        _presets_from_env(sources.env)
    )
    _check_ids_and_types(provider_configs)
    return {"provider_configs": provider_configs, "demo_credentials": demo}


def read_provider_bounds(sources: Sources) -> dict[str, Any]:
    get, rate = sources.get, sources.rate
    return {
        "credentials_ip_limit": rate("AUTH_CREDENTIALS_IP_LIMIT", "credentials_ip_limit"),
        "credentials_identifier_ip_limit": rate(
            "AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT", "credentials_identifier_ip_limit"
        ),
        "credentials_identifier_limit": rate(
            "AUTH_CREDENTIALS_IDENTIFIER_LIMIT", "credentials_identifier_limit"
        ),
        "oauth_ip_limit": rate("AUTH_OAUTH_IP_LIMIT", "oauth_ip_limit"),
        "device_ip_limit": rate("AUTH_DEVICE_IP_LIMIT", "device_ip_limit"),
        "max_device_requests": parse_int(
            "AUTH_MAX_DEVICE_REQUESTS",
            get("AUTH_MAX_DEVICE_REQUESTS", "max_device_requests"),
            Settings.max_device_requests,
            1,
        ),
        "bearer_ip_limit": rate("AUTH_BEARER_IP_LIMIT", "bearer_ip_limit"),
        "http_connect_timeout": parse_seconds(
            "AUTH_HTTP_CONNECT_TIMEOUT",
            get("AUTH_HTTP_CONNECT_TIMEOUT", "http_connect_timeout"),
            Settings.http_connect_timeout,
        ),
        "http_read_timeout": parse_seconds(
            "AUTH_HTTP_READ_TIMEOUT",
            get("AUTH_HTTP_READ_TIMEOUT", "http_read_timeout"),
            Settings.http_read_timeout,
        ),
        "provider_token_refresh_margin": timedelta(
            seconds=parse_int(
                "AUTH_TOKEN_REFRESH_MARGIN",
                get("AUTH_TOKEN_REFRESH_MARGIN", "token_refresh_margin"),
                int(Settings.provider_token_refresh_margin.total_seconds()),
                0,
            )
        ),
        "bearer_cache_ttl": timedelta(
            seconds=parse_int(
                "AUTH_BEARER_CACHE_TTL",
                get("AUTH_BEARER_CACHE_TTL", "bearer_cache_ttl"),
                int(Settings.bearer_cache_ttl.total_seconds()),
                0,
            )
        ),
    }


def _check_ids_and_types(provider_configs: tuple[Mapping[str, Any], ...]) -> None:
    seen: set[str] = set()
    for index, provider in enumerate(provider_configs):
        pid = provider.get("id")
        where = f"provider #{index + 1}" if pid is None else f"provider {pid!r}"
        if not isinstance(pid, str) or not PROVIDER_ID_RE.fullmatch(pid):
            raise ConfigError(f"{where}: id must match [a-z0-9_-]+")
        if pid in seen:
            raise ConfigError(f"{where}: duplicate id")
        seen.add(pid)
        if not isinstance(provider.get("type"), str):
            raise ConfigError(f"{where}: type is required (oidc, oauth, email or credentials)")


def _secret_from_env(provider: dict[str, Any], env_vars: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve ``client_secret_env = "NAME"`` so secrets can stay out of the TOML file."""
    name = provider.get("client_secret_env")
    if name is None:
        return provider
    secret = opt_str(env_vars.get(str(name)))
    if secret is None:
        raise ConfigError(
            f"provider {provider.get('id')!r}: client_secret_env names {name!r}, which is not set"
        )
    rest = {k: v for k, v in provider.items() if k != "client_secret_env"}
    return rest | {"client_secret": secret}


def _presets_from_env(env_vars: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Turn ``AUTH_<PRESET>_ID``/``_SECRET``/``_ISSUER`` into provider declarations."""
    found = []
    for preset in PRESET_IDS:
        prefix = "AUTH_" + preset.upper().replace("-", "_")
        client_id = opt_str(env_vars.get(f"{prefix}_ID"))
        if client_id is None:
            continue
        entry: dict[str, Any] = {
            "id": preset,
            "type": "preset",
            "preset": preset,
            "client_id": client_id,
        }
        for suffix in ("SECRET", "ISSUER"):
            value = opt_str(env_vars.get(f"{prefix}_{suffix}"))
            if value is not None:
                entry[f"client_{suffix.lower()}" if suffix == "SECRET" else "issuer"] = value
        found.append(entry)
    return found
