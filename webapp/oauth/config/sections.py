"""The sections of a provider's table, one function each (client authentication has a module).

Each checks its settings and returns its part of ``OAuthConfig``: keyword arguments where
it has several. ``parse_config`` calls them in the order their checks have always run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.oauth.config.model import BEARER_MODES, BEARER_TOKEN_TYPES, LOGOUT_MODES
from webapp.oauth.config.table import Table
from webapp.oauth.presets import OIDC_PROFILE, PRESETS, Preset, entra_issuer
from webapp.settings import ConfigError

_SIGN_IN_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")
_FEATURE_ENDPOINTS = (
    "revocation_endpoint",
    "introspection_endpoint",
    "end_session_endpoint",
    "device_authorization_endpoint",
)
_CHECKS = frozenset({"state", "pkce", "nonce"})
_PROFILE_KEYS = frozenset({"sub", "email", "email_verified", "name", "image"})


def named_preset(entry: Mapping[str, Any], where: str) -> Preset | None:
    """The preset the table names, if any; ``type = "preset"`` must name one."""
    preset_id = entry.get("preset")
    if preset_id is None:
        if entry["type"] == "preset":
            raise ConfigError(f"{where}: preset is required")
        return None
    found = PRESETS.get(str(preset_id))
    if found is None:
        known = ", ".join(PRESETS)
        raise ConfigError(f"{where}: unknown preset {preset_id!r} (known: {known})")
    return found


def provider_kind(entry: Mapping[str, Any], preset: Preset | None, where: str) -> str:
    """The provider's type: its preset's, which a type other than ``preset`` must match."""
    declared: str = preset.type if entry["type"] == "preset" and preset else entry["type"]
    if preset is not None and declared != preset.type:
        raise ConfigError(f"{where}: type must be {preset.type!r} for preset {entry['preset']!r}")
    return declared


def with_tenant_issuer(
    entry: Mapping[str, Any], preset: Preset | None, kind: str
) -> Mapping[str, Any]:
    """Entra: ``tenant_id`` stands for that tenant's issuer when no issuer is given."""
    tenant_id = entry.get("tenant_id")
    if kind != "oidc" or preset is None or not preset.tenant_issuer or not tenant_id:
        return entry
    return entry if entry.get("issuer") else {**entry, "issuer": entra_issuer(tenant_id)}


def discovery(table: Table, allow_insecure: bool) -> dict[str, Any]:
    """The issuer and the sign-in endpoints: oidc discovers those left out, oauth names all."""
    if table.kind == "oidc":
        issuer = table.url("issuer", required=True, allow_insecure=allow_insecure)
    elif table.kind == "oauth":
        issuer = None
    else:
        raise ConfigError(f"{table.where}: type must be oidc or oauth")
    required = table.kind == "oauth"
    endpoints = {
        name: table.url(name, required=required, allow_insecure=allow_insecure)
        for name in _SIGN_IN_ENDPOINTS
    }
    return {"issuer": issuer, **endpoints}


def sign_in(table: Table) -> dict[str, Any]:
    """What the authorization request carries, and what its answer may do here."""
    checks = _checks(table)
    params = table.opt("authorization_params", {})
    if not isinstance(params, Mapping) or not all(
        isinstance(v, str | int | bool) for v in params.values()
    ):
        raise ConfigError(f"{table.where}: authorization_params must be a table of strings")
    profile = _profile(table)
    response_mode = table.text("response_mode")
    if response_mode not in (None, "query", "form_post"):
        raise ConfigError(f"{table.where}: response_mode must be query or form_post")
    return {
        "checks": checks,
        "authorization_params": {k: str(v) for k, v in params.items()},
        "profile": profile,
        "response_mode": response_mode,
        "allow_email_linking": table.flag("allow_dangerous_email_account_linking"),
    }


def _checks(table: Table) -> frozenset[str]:
    default = ["state", "pkce", "nonce"] if table.kind == "oidc" else ["state", "pkce"]
    value = table.opt("checks", default)
    if not isinstance(value, list) or not set(value) <= _CHECKS:
        raise ConfigError(f"{table.where}: checks must be a list drawn from state, pkce, nonce")
    checks = frozenset(value)
    if not checks & {"state", "pkce"}:
        # Without either, nothing ties the callback to the browser that started it.
        raise ConfigError(f"{table.where}: checks must include state or pkce")
    if "nonce" in checks and table.kind != "oidc":
        raise ConfigError(f"{table.where}: the nonce check needs type oidc")
    return checks


def _profile(table: Table) -> Mapping[str, str | list[str]]:
    """Where the provider's profile keeps the fields we need; ``sub`` is required."""
    oauth_default = {**OIDC_PROFILE, "sub": ["sub", "id"]}
    profile = table.opt("profile", OIDC_PROFILE if table.kind == "oidc" else oauth_default)
    if (
        not isinstance(profile, Mapping)
        or not set(profile) <= _PROFILE_KEYS
        or "sub" not in profile
    ):
        raise ConfigError(
            f"{table.where}: profile must map sub (and optionally email, email_verified, name, "
            "image) to fields of the provider's profile"
        )
    return profile


def provider_features(table: Table, allow_insecure: bool) -> dict[str, Any]:
    """Beyond sign-in: token revocation and introspection, logout, device flow, provider MFA."""
    endpoints = {
        name: table.url(name, required=False, allow_insecure=allow_insecure)
        for name in _FEATURE_ENDPOINTS
    }
    logout = table.text("logout")
    if logout is not None and logout not in LOGOUT_MODES:
        raise ConfigError(f"{table.where}: logout must be rp-initiated (or left out)")
    features = {
        **endpoints,
        "logout": logout,
        "backchannel_logout": table.flag("backchannel_logout"),
        "device_flow": table.flag("device_flow"),
        "trust_provider_mfa": table.flag("trust_provider_mfa"),
    }
    if table.kind == "oauth":
        _refuse_what_needs_oidc(table.where, features)
    return features


def _refuse_what_needs_oidc(where: str, features: Mapping[str, Any]) -> None:
    """Only an OpenID Connect provider's discovery can name these endpoints; and only its
    ID tokens carry what back-channel logout needs (sub, sid, keys to check)."""
    if features["backchannel_logout"]:
        raise ConfigError(f"{where}: backchannel_logout needs type oidc")
    if features["trust_provider_mfa"]:
        raise ConfigError(f"{where}: trust_provider_mfa needs type oidc (an ID token's amr)")
    for enabled, needed in (
        (features["logout"] is not None, "end_session_endpoint"),
        (features["device_flow"], "device_authorization_endpoint"),
    ):
        if enabled and not features[needed]:
            raise ConfigError(f"{where}: {needed} is required for type oauth")


def bearer_tokens(
    table: Table, client_id: str, introspection_endpoint: str | None
) -> dict[str, Any]:
    """Whether ``Authorization: Bearer`` tokens from this provider are accepted, and how."""
    mode = _bearer_mode(table)
    if mode == "introspection" and table.kind == "oauth" and not introspection_endpoint:
        # Only an OpenID Connect provider's discovery can name it.
        raise ConfigError(
            f"{table.where}: introspection_endpoint is required to check bearer tokens"
        )
    audiences = table.opt("bearer_token_audiences", [client_id])
    if not (
        isinstance(audiences, list)
        and audiences
        and all(isinstance(a, str) and a for a in audiences)
    ):
        raise ConfigError(f"{table.where}: bearer_token_audiences must be a list of strings")
    token_type = table.text("bearer_token_type")
    subject_claim = table.text("bearer_subject_claim")
    if mode is None and (token_type or subject_claim):
        named = "bearer_token_type" if token_type else "bearer_subject_claim"
        raise ConfigError(f"{table.where}: {named} needs accept_bearer_tokens = true")
    if token_type is not None and token_type not in BEARER_TOKEN_TYPES:
        raise ConfigError(f"{table.where}: bearer_token_type must be required or optional")
    if token_type is not None and mode != "introspection":
        raise ConfigError(
            f"{table.where}: bearer_token_type is for bearer_tokens = introspection"
            " (a JWT access token's typ says what it is)"
        )
    return {
        "bearer_tokens": mode,
        "bearer_token_audiences": tuple(audiences),
        "bearer_token_type": token_type or "required",
        "bearer_subject_claim": subject_claim or "sub",
    }


def _bearer_mode(table: Table) -> str | None:
    accept, mode = table.flag("accept_bearer_tokens"), table.text("bearer_tokens")
    if not accept:
        if mode is not None:
            raise ConfigError(f"{table.where}: bearer_tokens needs accept_bearer_tokens = true")
        return None
    mode = mode or "introspection"
    if mode not in BEARER_MODES:
        raise ConfigError(f"{table.where}: bearer_tokens must be introspection or jwt")
    if mode == "jwt" and table.kind != "oidc":
        raise ConfigError(
            f"{table.where}: bearer_tokens = jwt needs type oidc (its issuer and keys)"
        )
    return mode


def presentation(table: Table) -> dict[str, Any]:
    """The sign-in button: its logo and its name."""
    # Logos ship with the app (webapp/static/providers): the sign-in page loads nothing
    # from a third party, which would tell it who is about to sign in.
    preset, entry_id = table.preset, table.values["id"]
    logo = table.text("logo") or (
        f"providers/{table.values['preset']}.svg" if preset else "providers/oidc.svg"
    )
    name = table.text("name", preset.name if preset else entry_id) or entry_id
    return {"logo": logo, "name": name}
