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
from webapp.settings.sources import Setting, Sources, declare

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


SETTINGS = declare(
    Setting(
        "AUTH_<PRESET>_ID",
        None,
        "Enables a preset provider from the environment alone with this client id: "
        "`<PRESET>` is the preset's id in upper case, `-` written as `_` "
        "(`AUTH_GITHUB_ID`, `AUTH_MICROSOFT_ENTRA_ID_ID`). Or declare it in the TOML file "
        'with `preset = "<id>"`.',
        default="none",
    ),
    Setting(
        "AUTH_<PRESET>_SECRET",
        None,
        "That preset's client secret.",
        default="none",
    ),
    Setting(
        "AUTH_<PRESET>_ISSUER",
        None,
        "That preset's issuer, for the presets whose customers each have their own (Keycloak, "
        "Okta, Auth0, authentik, ZITADEL, Cognito, a self-hosted GitLab, an Entra tenant).",
        default="the preset's, where it has one",
    ),
    Setting(
        "AUTH_DEMO_CREDENTIALS",
        "demo_credentials",
        "The development demo sign-in: any address, password `demo`. Refused at start-up "
        "outside development.",
        default="on in development when no credentials provider is configured",
    ),
    Setting(
        "AUTH_CREDENTIALS_IP_LIMIT",
        "credentials_ip_limit",
        "Credentials attempts per client address (IPv6: per /64) per window, `count/window`.",
        field="credentials_ip_limit",
    ),
    Setting(
        "AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT",
        "credentials_identifier_ip_limit",
        "Credentials attempts per identifier (the form's first field) from one client "
        "address, or from one browser that signed in as it before: the strict limit.",
        field="credentials_identifier_ip_limit",
    ),
    Setting(
        "AUTH_CREDENTIALS_IDENTIFIER_LIMIT",
        "credentials_identifier_limit",
        "Credentials attempts per identifier from all browsers that never signed in as it: "
        "the looser limit against guesses spread over many addresses.",
        field="credentials_identifier_limit",
    ),
    Setting(
        "AUTH_OAUTH_IP_LIMIT",
        "oauth_ip_limit",
        "Authorization codes a client address (IPv6: per /64) has us exchange at a "
        "provider per window; a code the provider accepts gives its count back.",
        field="oauth_ip_limit",
    ),
    Setting(
        "AUTH_DEVICE_IP_LIMIT",
        "device_ip_limit",
        "Device sign-ins (sign-in with a code) started per client address (IPv6: per /64) "
        "per window.",
        field="device_ip_limit",
    ),
    Setting(
        "AUTH_MAX_DEVICE_REQUESTS",
        "max_device_requests",
        "Device sign-ins in progress at once, all clients together (at least 1).",
        field="max_device_requests",
    ),
    Setting(
        "AUTH_BEARER_IP_LIMIT",
        "bearer_ip_limit",
        "Bearer tokens not in the introspection cache, per client address (IPv6: per /64) "
        "per window: each is a request to the provider; past it 429 `RateLimited`.",
        field="bearer_ip_limit",
    ),
    Setting(
        "AUTH_HTTP_CONNECT_TIMEOUT",
        "http_connect_timeout",
        "Seconds to wait for a TCP connection to an identity provider (more than 0, at most 300).",
        field="http_connect_timeout",
    ),
    Setting(
        "AUTH_HTTP_READ_TIMEOUT",
        "http_read_timeout",
        "Seconds to wait for an identity provider's answer once connected.",
        field="http_read_timeout",
    ),
    Setting(
        "AUTH_TOKEN_REFRESH_MARGIN",
        "token_refresh_margin",
        "Whole seconds (`0` or more): a stored provider access token expiring within this is "
        "refreshed before `provider_access_token` or `GET {AUTH_URL}/token/<provider>` hands "
        "it out.",
        field="provider_token_refresh_margin",
    ),
    Setting(
        "AUTH_BEARER_CACHE_TTL",
        "bearer_cache_ttl",
        "Whole seconds (`0` or more) an introspection answer about a bearer token is reused, "
        "never past the token's expiry; `0` asks every time.",
        field="bearer_cache_ttl",
    ),
)


def read_providers(sources: Sources, development: bool) -> dict[str, Any]:
    """The provider declarations (TOML tables, then presets from the environment), and the
    development demo sign-in."""
    get, _ = sources.readers(SETTINGS)
    demo = parse_bool("AUTH_DEMO_CREDENTIALS", get("AUTH_DEMO_CREDENTIALS"))
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
    get, rate = sources.readers(SETTINGS)
    return {
        "credentials_ip_limit": rate("AUTH_CREDENTIALS_IP_LIMIT"),
        "credentials_identifier_ip_limit": rate("AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT"),
        "credentials_identifier_limit": rate("AUTH_CREDENTIALS_IDENTIFIER_LIMIT"),
        "oauth_ip_limit": rate("AUTH_OAUTH_IP_LIMIT"),
        "device_ip_limit": rate("AUTH_DEVICE_IP_LIMIT"),
        "max_device_requests": parse_int(
            "AUTH_MAX_DEVICE_REQUESTS",
            get("AUTH_MAX_DEVICE_REQUESTS"),
            Settings.max_device_requests,
            1,
        ),
        "bearer_ip_limit": rate("AUTH_BEARER_IP_LIMIT"),
        "http_connect_timeout": parse_seconds(
            "AUTH_HTTP_CONNECT_TIMEOUT",
            get("AUTH_HTTP_CONNECT_TIMEOUT"),
            Settings.http_connect_timeout,
        ),
        "http_read_timeout": parse_seconds(
            "AUTH_HTTP_READ_TIMEOUT",
            get("AUTH_HTTP_READ_TIMEOUT"),
            Settings.http_read_timeout,
        ),
        "provider_token_refresh_margin": timedelta(
            seconds=parse_int(
                "AUTH_TOKEN_REFRESH_MARGIN",
                get("AUTH_TOKEN_REFRESH_MARGIN"),
                int(Settings.provider_token_refresh_margin.total_seconds()),
                0,
            )
        ),
        "bearer_cache_ttl": timedelta(
            seconds=parse_int(
                "AUTH_BEARER_CACHE_TTL",
                get("AUTH_BEARER_CACHE_TTL"),
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
            raise ConfigError(
                f"{where}: type is required (oidc, oauth, email, credentials or saml)"
            )


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
