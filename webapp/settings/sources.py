"""Where a setting's value comes from, and which source wins.

Lowest first: the TOML file named by AUTH_CONFIG (its ``[auth]`` table), the environment,
then the overrides an embedding application passes (``create_app``'s ``config``). This is
the only module that looks at ``os.environ``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webapp.settings.model import ConfigError, RateLimit, Settings
from webapp.settings.parsers import opt_str, parse_rate


@dataclass(frozen=True)
class Sources:
    """The environment and the TOML file, each read once at start-up."""

    #: The environment with the overrides on top (provider secrets and presets too).
    env: dict[str, Any]
    #: The TOML file (AUTH_CONFIG) if any, its ``[auth]`` table and its ``[[providers]]``.
    config_path: str | None
    auth: dict[str, Any]
    providers: list[dict[str, Any]]

    @classmethod
    def read(
        cls, environ: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
    ) -> Sources:
        env: dict[str, Any] = dict(os.environ if environ is None else environ)
        env.update(overrides or {})
        config_path = opt_str(env.get("AUTH_CONFIG"))
        auth, providers = _read_toml(config_path)
        return cls(env, config_path, auth, providers)

    def get(self, name: str, toml_key: str | None = None) -> Any:
        """The setting ``name``, else the TOML ``[auth]`` key ``toml_key``; None: neither."""
        if name in self.env and self.env[name] not in (None, ""):
            return self.env[name]
        if toml_key and toml_key in self.auth:
            return self.auth[toml_key]
        return None

    def rate(self, name: str, field_name: str) -> RateLimit:
        """Parse the limit setting ``name`` (TOML key: the field's name), or its default."""
        default: RateLimit = getattr(Settings, field_name)
        return parse_rate(name, self.get(name, field_name), default)


def _read_toml(path: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if path is None:
        return {}, []
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"AUTH_CONFIG: file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"AUTH_CONFIG: {path} is not valid TOML: {exc}") from None
    auth = data.get("auth", {})
    providers = data.get("providers", [])
    if not isinstance(auth, dict):
        raise ConfigError(f"AUTH_CONFIG: [auth] in {path} must be a table")
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise ConfigError(f"AUTH_CONFIG: providers in {path} must be [[providers]] tables")
    base_dir = str(Path(path).resolve().parent)
    # Relative file paths in a provider (key files) are relative to the TOML file.
    return auth, [{**p, "_config_dir": base_dir} for p in providers]
