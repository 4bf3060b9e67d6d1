"""Where a setting's value comes from, and which source wins.

Lowest first: the TOML file named by AUTH_CONFIG (its ``[auth]`` table), the environment,
then the overrides (``load_settings``'s; for a Flask app, its ``app.config``: ``of_app``),
then, where none of them sets a name, the app's defaults (``SQLALCHEMY_DATABASE_URI`` for
DATABASE_URL). This is the only module that looks at ``os.environ``.

Each section reader declares the settings it reads as ``Setting`` entries (its ``SETTINGS``:
name, TOML key, meaning, default) and reads them through ``Sources.readers``, by name: these
declarations are the one list of settings, and the documentation's settings reference is
generated from them.

A renamed setting's old name keeps working until the next major release, with a warning at
start-up (``RENAMED_SETTINGS``).
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webapp.settings.model import ConfigError, RateLimit, Settings
from webapp.settings.parsers import nearest, opt_str, parse_rate

log = logging.getLogger("webapp.settings")


@dataclass(frozen=True)
class Setting:
    """One setting as an operator gives it.

    ``name`` is the environment variable and the ``app.config`` key; ``toml_key`` the key of
    the TOML file's ``[auth]`` table (``brand.name``: the key ``name`` of ``[auth.brand]``),
    None when the file cannot set it. ``meaning`` says what it does, for the reference.
    """

    name: str
    toml_key: str | None
    meaning: str
    #: The ``Settings`` field holding the value, when its default is that field's fixed
    #: default (the reference shows it; limits are read with it as their default).
    field: str | None = None
    #: The default in words, where it follows other settings (development, AUTH_URL's host)
    #: or is no field's; it wins over the field's in the reference.
    default: str | None = None
    #: How a duration field's default is written in this setting: ``seconds`` or ``days``.
    unit: str = "seconds"

    @property
    def toml_label(self) -> str | None:
        """Where the TOML file sets it: ``[auth] url``, ``[auth.brand] name``."""
        if self.toml_key is None:
            return None
        table, _, key = self.toml_key.rpartition(".")
        return f"[auth.{table}] {key}" if table else f"[auth] {key}"


def declare(*settings: Setting) -> Mapping[str, Setting]:
    """A section's settings by name, in the order given (a section's ``SETTINGS``)."""
    table = {s.name: s for s in settings}
    if len(table) != len(settings):
        raise ValueError("a setting is declared twice")
    return table


@dataclass(frozen=True)
class RenamedSetting:
    """A setting's old name, still read (with a warning) until ``removed_in_major``.0.0."""

    #: The old environment variable and ``app.config`` key.
    old_name: str
    new_name: str
    #: The major version whose first release no longer reads the old name.
    removed_in_major: int
    #: The old TOML ``[auth]`` key, when the rename changed it too.
    old_toml_key: str | None = None


#: Settings renamed since the last major release, old name first. Add an entry when a
#: setting is renamed, with ``removed_in_major`` the next major version; remove it, and so
#: stop reading the old name, in that major release.
RENAMED_SETTINGS: tuple[RenamedSetting, ...] = ()


#: The setting that names the TOML file, read before the file (``Sources.read``).
SETTINGS = declare(
    Setting(
        "AUTH_CONFIG",
        None,
        "A TOML file to read settings from: its `[auth]` table (the TOML keys of this page) "
        "and its `[[providers]]`. The environment (and `app.config`) wins over it.",
        default="none",
    ),
    Setting(
        "AUTH_PROVIDERS",
        None,
        "An embedding application's providers, in `app.config` only: a list of dicts like "
        "the TOML file's `[[providers]]` tables (relative key paths are relative to the "
        "app's folder), declared after the file's.",
        default="none",
    ),
)


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
    #: The old names already warned about, so that each is warned about once.
    _warned: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    #: The ``[auth]`` keys read so far: once every setting is read, the others are typos.
    _read_keys: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    @classmethod
    def read(
        cls, environ: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
    ) -> Sources:
        """``environ`` (None: the process's) with ``overrides`` on top, and the TOML file."""
        env: dict[str, Any] = dict(process_environment() if environ is None else environ)
        env.update(overrides or {})
        # Read through ``get`` so that a renamed AUTH_CONFIG's old name is honoured too.
        config_path = opt_str(cls(env, None, {}, []).get(SETTINGS["AUTH_CONFIG"]))
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
        declared = config.get(SETTINGS["AUTH_PROVIDERS"].name) or []
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

    def readers(
        self, declared: Mapping[str, Setting]
    ) -> tuple[Callable[[str], Any], Callable[[str], RateLimit]]:
        """``get(name)`` and ``rate(name)`` for the settings a section declares: a name it
        does not declare is a ``KeyError``, so that every setting read is declared."""

        def get(name: str) -> Any:
            return self.get(declared[name])

        def rate(name: str) -> RateLimit:
            return self.rate(declared[name])

        return get, rate

    def get(self, setting: Setting) -> Any:
        """The declared ``setting``'s value, else its TOML key's, else an old name of it
        (``RENAMED_SETTINGS``; warned about once), else the default for its name; None: none
        of them. An old name set to another value than the new name's is an error naming
        both."""
        name, toml_key = setting.name, setting.toml_key
        if toml_key:
            self._read_keys.add(toml_key.partition(".")[0])
        found = self._given(name, toml_key)
        for renamed in (r for r in RENAMED_SETTINGS if r.new_name == name):
            if renamed.old_toml_key:
                self._read_keys.add(renamed.old_toml_key)
            old = self._given(renamed.old_name, renamed.old_toml_key)
            if old is None:
                continue
            if found is None:
                found = old
                new_label = f"[auth] {toml_key}" if toml_key and old.in_toml else name
                self._warn_renamed(old.label, new_label, renamed.removed_in_major)
            elif _as_text(found.value) != _as_text(old.value):
                raise ConfigError(
                    f"{found.label} and {old.label} are both set, to different values: "
                    f"{old.label} is an old name of {name}; remove it"
                )
        return self.defaults.get(name) if found is None else found.value

    def table(self, key: str) -> Mapping[str, Any]:
        """The ``[auth.<key>]`` table (empty when there is none)."""
        self._read_keys.add(key)
        table = self.auth.get(key, {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"[auth.{key}] must be a table")
        return table

    def refuse_unknown_keys(self) -> None:
        """Refuse an ``[auth]`` key no setting read (call once every setting is read): a
        typo would otherwise leave its setting at the default without a word."""
        for key in self.auth:
            if key not in self._read_keys:
                raise ConfigError(
                    f"AUTH_CONFIG: unknown key {key!r} in [auth] of {self.config_path}"
                    + nearest(key, self._read_keys)
                )

    def _given(self, name: str, toml_key: str | None) -> _Given | None:
        """``name``'s value in the environment (with the overrides), else ``toml_key``'s
        in the TOML ``[auth]`` table; None: neither sets it."""
        if name in self.env and self.env[name] not in (None, ""):
            return _Given(name, self.env[name], in_toml=False)
        if toml_key:
            table, _, key = toml_key.rpartition(".")
            values = self.auth.get(table, {}) if table else self.auth
            if isinstance(values, Mapping) and key in values:
                label = f"[auth.{table}] {key}" if table else f"[auth] {key}"
                return _Given(label, values[key], in_toml=True)
        return None

    def _warn_renamed(self, old_label: str, new_label: str, removed_in_major: int) -> None:
        """Say once that ``old_label`` was used; never its value, which may be a secret."""
        if old_label in self._warned:
            return
        self._warned.add(old_label)
        log.warning(
            "%s is renamed %s: the old name still works, with this warning, until release "
            "%d.0.0 removes it; rename it in your configuration",
            old_label,
            new_label,
            removed_in_major,
        )

    def rate(self, setting: Setting) -> RateLimit:
        """Parse the limit ``setting``, or its field's default."""
        assert setting.field is not None, setting.name
        default: RateLimit = getattr(Settings, setting.field)
        return parse_rate(setting.name, self.get(setting), default)


@dataclass(frozen=True)
class _Given:
    """A value one source sets, and the name it is set under there (for messages)."""

    label: str
    value: Any
    in_toml: bool


def _as_text(value: Any) -> str:
    """A value as the environment would spell it, so that ``600`` (TOML) and ``"600"`` (the
    environment) compare equal, as do ``true`` and ``"true"``, and ``["a", "b"]`` and
    ``"a,b"``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_as_text(item) for item in value)
    return str(value).strip()


#: The TOML file's top-level keys: the ``[auth]`` table and the ``[[providers]]`` list.
_TOML_TABLES = ("auth", "providers")


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
    for key in data:
        if key not in _TOML_TABLES:
            raise ConfigError(
                f"AUTH_CONFIG: unknown key {key!r} in {path}; it takes [auth] and [[providers]]"
                + nearest(key, _TOML_TABLES)
            )
    auth = data.get("auth", {})
    providers = data.get("providers", [])
    if not isinstance(auth, dict):
        raise ConfigError(f"AUTH_CONFIG: [auth] in {path} must be a table")
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise ConfigError(f"AUTH_CONFIG: providers in {path} must be [[providers]] tables")
    base_dir = str(Path(path).resolve().parent)
    # Relative file paths in a provider (key files) are relative to the TOML file.
    return auth, [{**p, "_config_dir": base_dir} for p in providers]
