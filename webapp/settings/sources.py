"""Where a setting's value comes from, and which source wins.

Lowest first: the TOML file named by AUTH_CONFIG (its ``[auth]`` table), the environment,
then the overrides (``load_settings``'s; for a Flask app, its ``app.config``: ``of_app``),
then, where none of them sets a name, the app's defaults (``SQLALCHEMY_DATABASE_URI`` for
DATABASE_URL). This is the only module that looks at ``os.environ``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webapp.settings.model import ConfigError, RateLimit, Settings
from webapp.settings.parsers import opt_str, parse_rate


def process_environment() -> Mapping[str, str]:
    """The process's environment: where the standalone app reads its settings."""
    return os.environ


@dataclass(frozen=True)
class Sources:
    """The environment and the TOML file, each read once at start-up."""

    #: The environment with the overrides on top (provider secrets and presets too).
    env: dict[str, Any]
    #: The TOML file (AUTH_CONFIG) if any, its ``[auth]`` table and its ``[[providers]]``.
    config_path: str | None
    auth: dict[str, Any]
    providers: list[dict[str, Any]]
    #: Values for names no source sets.
    defaults: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(
        cls, environ: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
    ) -> Sources:
        """``environ`` (None: the process's) with ``overrides`` on top, and the TOML file."""
        env: dict[str, Any] = dict(process_environment() if environ is None else environ)
        env.update(overrides or {})
        config_path = opt_str(env.get("AUTH_CONFIG"))
        auth, providers = _read_toml(config_path)
        return cls(env, config_path, auth, providers)

    @classmethod
    def of_app(
        cls,
        config: Mapping[str, Any],
        environ: Mapping[str, str] | None,
        *,
        root_path: str,
        defaults: Mapping[str, Any],
    ) -> Sources:
        """A Flask app's settings: its ``config`` over ``environ`` (none when None) over the
        TOML file, and the providers of ``AUTH_PROVIDERS`` (a list of tables, as the TOML
        file's ``[[providers]]``; relative paths in them are relative to ``root_path``)
        after the file's. Where no source sets a name: ``defaults``, and for DATABASE_URL
        the app's ``SQLALCHEMY_DATABASE_URI``."""
        sources = cls.read(environ or {}, config)
        declared = config.get("AUTH_PROVIDERS") or []
        if not isinstance(declared, list | tuple) or not all(
            isinstance(p, Mapping) for p in declared
        ):
            raise ConfigError("AUTH_PROVIDERS must be a list of provider tables (dicts)")
        providers = [{"_config_dir": root_path, **p} for p in declared]
        return cls(
            sources.env,
            sources.config_path,
            sources.auth,
            sources.providers + providers,
            {**defaults, "DATABASE_URL": config.get("SQLALCHEMY_DATABASE_URI")},
        )

    def get(self, name: str, toml_key: str | None = None) -> Any:
        """The setting ``name``, else the TOML ``[auth]`` key ``toml_key``, else the
        default for ``name``; None: none of them."""
        if name in self.env and self.env[name] not in (None, ""):
            return self.env[name]
        if toml_key and toml_key in self.auth:
            return self.auth[toml_key]
        return self.defaults.get(name)

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
