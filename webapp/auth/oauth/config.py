"""Configuration of OAuth/OIDC providers: a TOML table or preset, validated into OAuthConfig.

Every mistake raises ConfigError naming the provider and the field, at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from webapp.auth.oauth.client_auth import (
    METHODS,
    SECRET_METHODS,
    ClientCredentials,
    load_private_key,
)
from webapp.auth.oauth.metadata import url_allowed
from webapp.auth.oauth.presets import OIDC_PROFILE, PRESETS, Preset, apple_client_secret
from webapp.settings import ConfigError

_FIELDS = frozenset(
    {
        "id",
        "type",
        "name",
        "preset",
        "issuer",
        "authorization_endpoint",
        "token_endpoint",
        "userinfo_endpoint",
        "revocation_endpoint",
        "introspection_endpoint",
        "revoke_on_signout",
        "end_session_endpoint",
        "logout",
        "backchannel_logout",
        "device_authorization_endpoint",
        "device_flow",
        "trust_provider_mfa",
        "accept_bearer_tokens",
        "bearer_tokens",
        "bearer_token_audiences",
        "client_id",
        "client_secret",
        "token_endpoint_auth_method",
        "token_endpoint_auth_signing_alg",
        "client_private_key_file",
        "scope",
        "checks",
        "authorization_params",
        "allow_dangerous_email_account_linking",
        "allow_insecure",
        "response_mode",
        "profile",
        "logo",
    }
)
_PROFILE_KEYS = frozenset({"sub", "email", "email_verified", "name", "image"})
_CHECKS = frozenset({"state", "pkce", "nonce"})
#: How a bearer token of this provider is checked: at its introspection endpoint (RFC 7662)
#: or locally, as a signed JWT access token (RFC 9068) against its JWKS.
BEARER_MODES = ("introspection", "jwt")
#: What signing out here does at the provider: nothing (None), or OpenID Connect
#: RP-Initiated Logout 1.0 (the browser goes to its end_session_endpoint).
LOGOUT_MODES = ("rp-initiated",)
#: Apple's client secrets may live 6 months; ours are made per exchange and live 5 minutes.
_APPLE_SECRET_LIFETIME = 300


@dataclass(frozen=True)
class OAuthConfig:
    """One provider's validated configuration."""

    id: str
    name: str
    type: str  # oidc | oauth
    client: ClientCredentials
    scope: str
    checks: frozenset[str]
    issuer: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    revocation_endpoint: str | None = None
    introspection_endpoint: str | None = None
    #: Revoke the account's tokens at the provider when a session it made signs out.
    revoke_on_signout: bool = False
    end_session_endpoint: str | None = None
    #: ``"rp-initiated"``: signing out of a session this provider made also signs the
    #: person out there (its end_session_endpoint). None: only here.
    logout: str | None = None
    #: Accept OpenID Connect Back-Channel Logout tokens at ``backchannel-logout/<id>``.
    backchannel_logout: bool = False
    device_authorization_endpoint: str | None = None
    #: Offer sign-in with the device authorization grant (RFC 8628) at ``device``.
    device_flow: bool = False
    #: Accept the ID token's ``amr`` (mfa, hwk, otp, …) as our second factor (oidc only).
    trust_provider_mfa: bool = False
    #: How ``Authorization: Bearer`` tokens from this provider are checked (None: refused).
    bearer_tokens: str | None = None
    #: What a bearer token's ``aud`` (or introspected ``client_id``) must name; default
    #: our client id.
    bearer_token_audiences: tuple[str, ...] = ()
    authorization_params: Mapping[str, str] = field(default_factory=dict)
    response_mode: str | None = None
    profile: Mapping[str, str | list[str]] = field(default_factory=lambda: OIDC_PROFILE)
    allow_email_linking: bool = False
    allow_insecure: bool = False
    logo: str | None = None
    preset: Preset | None = None


def parse_config(entry: Mapping[str, Any]) -> OAuthConfig:
    """Validate one provider declaration (with its preset's defaults); raise ConfigError."""
    where = f"provider {entry['id']!r}"
    preset: Preset | None = None
    preset_id = entry.get("preset")
    if preset_id is not None:
        preset = PRESETS.get(str(preset_id))
        if preset is None:
            known = ", ".join(PRESETS)
            raise ConfigError(f"{where}: unknown preset {preset_id!r} (known: {known})")
    elif entry["type"] == "preset":
        raise ConfigError(f"{where}: preset is required")
    allowed = _FIELDS | set(preset.extra_fields if preset else ())
    unknown = sorted(k for k in entry if k not in allowed and not k.startswith("_"))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}")

    def opt(name: str, default: Any = None) -> Any:
        value = entry.get(name)
        if value is None and preset is not None:
            value = getattr(preset, name, None)
        return default if value is None else value

    def text(name: str, default: str | None = None) -> str | None:
        value = opt(name, default)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: {name} must be a non-empty string")
        return value.strip() if isinstance(value, str) else None

    kind = preset.type if entry["type"] == "preset" and preset else entry["type"]
    if preset is not None and kind != preset.type:
        raise ConfigError(f"{where}: type must be {preset.type!r} for preset {preset_id!r}")

    def flag(name: str) -> bool:
        value = opt(name, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {name} must be true or false")
        return value

    allow_insecure = flag("allow_insecure")

    def url(name: str, *, required: bool) -> str | None:
        value = text(name)
        if value is None:
            if required:
                raise ConfigError(f"{where}: {name} is required for type {kind!r}")
            return None
        if not url_allowed(value, allow_insecure=allow_insecure):
            raise ConfigError(
                f"{where}: {name} must be an https:// URL (http:// only on loopback or with "
                "allow_insecure = true)"
            )
        return value.rstrip("/") if name == "issuer" else value

    issuer_default = None
    if preset is not None and preset.tenant_issuer and entry.get("tenant_id"):
        issuer_default = f"https://login.microsoftonline.com/{entry['tenant_id']}/v2.0"
    if kind == "oidc":
        if issuer_default and not entry.get("issuer"):
            entry = {**entry, "issuer": issuer_default}
        issuer = url("issuer", required=True)
        endpoints = {
            n: url(n, required=False)
            for n in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")
        }
    elif kind == "oauth":
        issuer = None
        endpoints = {
            n: url(n, required=True)
            for n in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")
        }
    else:
        raise ConfigError(f"{where}: type must be oidc or oauth")

    checks_value = opt(
        "checks", ["state", "pkce", "nonce"] if kind == "oidc" else ["state", "pkce"]
    )
    if not isinstance(checks_value, list) or not set(checks_value) <= _CHECKS:
        raise ConfigError(f"{where}: checks must be a list drawn from state, pkce, nonce")
    checks = frozenset(checks_value)
    if not checks & {"state", "pkce"}:
        # Without either, nothing ties the callback to the browser that started it.
        raise ConfigError(f"{where}: checks must include state or pkce")
    if "nonce" in checks and kind != "oidc":
        raise ConfigError(f"{where}: the nonce check needs type oidc")

    params = opt("authorization_params", {})
    if not isinstance(params, Mapping) or not all(
        isinstance(v, str | int | bool) for v in params.values()
    ):
        raise ConfigError(f"{where}: authorization_params must be a table of strings")
    profile = opt(
        "profile", OIDC_PROFILE if kind == "oidc" else {**OIDC_PROFILE, "sub": ["sub", "id"]}
    )
    if (
        not isinstance(profile, Mapping)
        or not set(profile) <= _PROFILE_KEYS
        or "sub" not in profile
    ):
        raise ConfigError(
            f"{where}: profile must map sub (and optionally email, email_verified, name, "
            "image) to fields of the provider's profile"
        )
    response_mode = text("response_mode")
    if response_mode not in (None, "query", "form_post"):
        raise ConfigError(f"{where}: response_mode must be query or form_post")
    linking = flag("allow_dangerous_email_account_linking")
    for name in (
        "revocation_endpoint",
        "introspection_endpoint",
        "end_session_endpoint",
        "device_authorization_endpoint",
    ):
        endpoints[name] = url(name, required=False)
    logout = text("logout")
    if logout is not None and logout not in LOGOUT_MODES:
        raise ConfigError(f"{where}: logout must be rp-initiated (or left out)")
    backchannel_logout = flag("backchannel_logout")
    device_flow = flag("device_flow")
    trust_provider_mfa = flag("trust_provider_mfa")
    if kind == "oauth":
        # Only an OpenID Connect provider's discovery can name these endpoints; and only
        # its ID tokens carry what back-channel logout needs (sub, sid, keys to check).
        if backchannel_logout:
            raise ConfigError(f"{where}: backchannel_logout needs type oidc")
        if trust_provider_mfa:
            raise ConfigError(f"{where}: trust_provider_mfa needs type oidc (an ID token's amr)")
        for enabled, needed in (
            (logout is not None, "end_session_endpoint"),
            (device_flow, "device_authorization_endpoint"),
        ):
            if enabled and not endpoints[needed]:
                raise ConfigError(f"{where}: {needed} is required for type oauth")
    client = _client(entry, preset, where, text)
    bearer_tokens = _bearer_mode(flag("accept_bearer_tokens"), text("bearer_tokens"), kind, where)
    if (
        bearer_tokens == "introspection"
        and kind == "oauth"
        and not endpoints.get("introspection_endpoint")
    ):
        # Only an OpenID Connect provider's discovery can name it.
        raise ConfigError(f"{where}: introspection_endpoint is required to check bearer tokens")
    audiences = opt("bearer_token_audiences", [client.client_id])
    if not (
        isinstance(audiences, list)
        and audiences
        and all(isinstance(a, str) and a for a in audiences)
    ):
        raise ConfigError(f"{where}: bearer_token_audiences must be a list of strings")
    # Logos ship with the app (webapp/static/providers): the sign-in page loads nothing
    # from a third party, which would tell it who is about to sign in.
    logo = text("logo") or (f"providers/{preset_id}.svg" if preset else "providers/oidc.svg")

    return OAuthConfig(
        id=entry["id"],
        name=text("name", preset.name if preset else entry["id"]) or entry["id"],
        type=kind,
        client=client,
        scope=text("scope", "openid email profile" if kind == "oidc" else None) or "",
        checks=checks,
        issuer=issuer,
        authorization_params={k: str(v) for k, v in params.items()},
        response_mode=response_mode,
        profile=profile,
        allow_email_linking=linking,
        revoke_on_signout=flag("revoke_on_signout"),
        logout=logout,
        backchannel_logout=backchannel_logout,
        device_flow=device_flow,
        trust_provider_mfa=trust_provider_mfa,
        bearer_tokens=bearer_tokens,
        bearer_token_audiences=tuple(audiences),
        allow_insecure=allow_insecure,
        logo=logo,
        preset=preset,
        **endpoints,
    )


def _bearer_mode(accept: bool, mode: str | None, kind: str, where: str) -> str | None:
    if not accept:
        if mode is not None:
            raise ConfigError(f"{where}: bearer_tokens needs accept_bearer_tokens = true")
        return None
    mode = mode or "introspection"
    if mode not in BEARER_MODES:
        raise ConfigError(f"{where}: bearer_tokens must be introspection or jwt")
    if mode == "jwt" and kind != "oidc":
        raise ConfigError(f"{where}: bearer_tokens = jwt needs type oidc (its issuer and keys)")
    return mode


def _client(
    entry: Mapping[str, Any], preset: Preset | None, where: str, text: Any
) -> ClientCredentials:
    client_id = text("client_id")
    if client_id is None:
        raise ConfigError(f"{where}: client_id is required")
    method = text("token_endpoint_auth_method", "client_secret_basic")
    if method not in METHODS:
        known = ", ".join(METHODS)
        raise ConfigError(f"{where}: token_endpoint_auth_method must be one of {known}")
    key_file = text("client_private_key_file")
    key = None
    if key_file is not None:
        path = Path(entry.get("_config_dir", ".")) / key_file
        key = load_private_key(path, where=f"{where}: client_private_key_file")

    team_id, key_id = text("team_id"), text("key_id")
    if preset is not None and preset.signed_client_secret and (team_id or key_id or key):
        # Apple: sign a fresh client secret per exchange rather than a 6-month one by hand.
        if team_id is None or key_id is None or key is None:
            raise ConfigError(
                f"{where}: team_id, key_id and client_private_key_file (the .p8 key) are "
                "all required to sign the client secret"
            )
        return ClientCredentials(
            client_id=client_id,
            method=method,
            secret_factory=partial(
                apple_client_secret,
                team_id=team_id,
                key_id=key_id,
                client_id=client_id,
                key=key,
                audience=text("issuer") or preset.issuer or "",
                lifetime=_APPLE_SECRET_LIFETIME,
            ),
        )
    secret = text("client_secret")
    if method in SECRET_METHODS and secret is None:
        raise ConfigError(f"{where}: client_secret (or client_secret_env) is required for {method}")
    if method == "private_key_jwt" and key is None:
        raise ConfigError(f"{where}: client_private_key_file is required for private_key_jwt")
    return ClientCredentials(
        client_id=client_id,
        method=method,
        secret=secret,
        private_key=key,
        signing_alg=text("token_endpoint_auth_signing_alg"),
    )
