"""A provider's table as the sections read it: its value, else its preset's, else a default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp.core import email_domains
from webapp.oauth.metadata import url_allowed
from webapp.oauth.presets import Preset
from webapp.settings import ConfigError

#: The fields a provider's table may hold; a preset adds its ``extra_fields``, and keys
#: starting with ``_`` are the settings loader's own (``_config_dir``).
FIELDS = frozenset(
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
        "bearer_token_type",
        "bearer_subject_claim",
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
        *email_domains.FIELDS,
    }
)


@dataclass(frozen=True)
class Table:
    """One provider's settings, each checked as it is read; errors start with ``where``."""

    values: Mapping[str, Any]
    preset: Preset | None
    where: str  # provider 'corp'
    kind: str  # oidc | oauth, as declared (checked with the issuer and endpoints)

    def opt(self, name: str, default: Any = None) -> Any:
        value = self.values.get(name)
        if value is None and self.preset is not None:
            value = getattr(self.preset, name, None)
        return default if value is None else value

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.opt(name, default)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{self.where}: {name} must be a non-empty string")
        return value.strip() if isinstance(value, str) else None

    def flag(self, name: str) -> bool:
        value = self.opt(name, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: {name} must be true or false")
        return value

    def url(self, name: str, *, required: bool, allow_insecure: bool) -> str | None:
        value = self.text(name)
        if value is None:
            if required:
                raise ConfigError(f"{self.where}: {name} is required for type {self.kind!r}")
            return None
        if not url_allowed(value, allow_insecure=allow_insecure):
            raise ConfigError(
                f"{self.where}: {name} must be an https:// URL (http:// only on loopback or with "
                "allow_insecure = true)"
            )
        return value.rstrip("/") if name == "issuer" else value
