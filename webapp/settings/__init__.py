"""Typed settings: read once at start-up from the environment and the optional TOML file
(``load_settings``), or from a Flask app's config (``Sources.of_app``, then ``settings_from``).

``settings_from`` reads each section of settings with its own reader (``core``,
``database``, ``providers``, ``pages``, ``passkeys``, ``email``, ``audit``, ``sessions``)
and puts them together in one frozen ``Settings`` (``model``). A bad setting stops start-up
with a ``ConfigError`` whose message names the setting or provider at fault; secrets never
appear in that message.

Each section declares the settings it reads (its ``SETTINGS``: name, TOML key, meaning,
default); ``SECTIONS`` lists them all, and the documentation's settings reference is
generated from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webapp.settings import audit as _audit
from webapp.settings import core as _core
from webapp.settings import database as _database
from webapp.settings import email as _email
from webapp.settings import pages as _pages
from webapp.settings import passkeys as _passkeys
from webapp.settings import providers as _providers
from webapp.settings import sessions as _sessions
from webapp.settings import sources as _sources
from webapp.settings.audit import read_audit
from webapp.settings.core import (
    LOOPBACK_HOSTS,
    is_ip_address,
    is_loopback_url,
    read_environment,
    read_log_format,
    read_metrics,
    read_secrets,
    read_site,
)
from webapp.settings.database import read_database
from webapp.settings.email import read_email
from webapp.settings.model import (
    Brand,
    ConfigError,
    RateLimit,
    Settings,
    TrustedProxies,
    current_settings,
    install,
)
from webapp.settings.pages import read_custom_pages, read_pages
from webapp.settings.passkeys import read_passkeys
from webapp.settings.providers import read_provider_bounds, read_providers
from webapp.settings.sessions import read_sessions
from webapp.settings.sources import Setting, Sources, process_environment

if TYPE_CHECKING:
    from webapp.settings.dev_server import DevServer

__all__ = [
    "LOOPBACK_HOSTS",
    "Brand",
    "ConfigError",
    "RateLimit",
    "SECTIONS",
    "Setting",
    "Settings",
    "TrustedProxies",
    "current_settings",
    "install",
    "is_ip_address",
    "is_loopback_url",
    "Sources",
    "load_settings",
    "process_environment",
    "settings_from",
]


#: Every setting an operator gives, by section: (title, that section's ``SETTINGS``).
SECTIONS: tuple[tuple[str, Mapping[str, Setting]], ...] = (
    ("The configuration file", _sources.SETTINGS),
    ("Environment, secrets and the site's address", _core.SETTINGS),
    ("Database", _database.SETTINGS),
    ("Providers, and what a sign-in through one may cost", _providers.SETTINGS),
    ("Brand, language and your own pages", _pages.SETTINGS),
    ("Passkeys, two-step verification and re-authentication", _passkeys.SETTINGS),
    ("E-mail", _email.SETTINGS),
    ("Audit trail and security notices", _audit.SETTINGS),
    ("Sessions and HSTS", _sessions.SETTINGS),
)


def load_settings(
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    instance_path: str | os.PathLike[str] = "instance",
    served: DevServer | None = None,
    own_mail_transport: bool = False,
) -> Settings:
    """Build the settings from the environment, the TOML file and explicit overrides.

    Precedence, lowest first: built-in defaults, the TOML file's ``[auth]`` table, the
    environment, ``overrides`` (used by tests and embedding applications). ``served``:
    where ``flask run`` serves (``webapp.settings.dev_server.dev_server()``); in development without
    AUTH_URL, the site's address is taken from it. ``own_mail_transport``: the application
    delivers mail itself (``AuthHooks.send_mail`` is set), so mail can be delivered without
    EMAIL_SERVER: the security notices are on by default, as with EMAIL_SERVER.
    """
    return settings_from(
        Sources.read(environ, overrides),
        instance_path=instance_path,
        served=served,
        own_mail_transport=own_mail_transport,
    )


def settings_from(
    sources: Sources,
    *,
    instance_path: str | os.PathLike[str] = "instance",
    served: DevServer | None = None,
    own_mail_transport: bool = False,
) -> Settings:
    """Build the settings from ``sources``; ``instance_path``, ``served`` and
    ``own_mail_transport`` as for ``load_settings``."""
    instance = Path(instance_path)
    env = read_environment(sources)
    development = env == "development"
    log_format = read_log_format(sources)
    keys = read_secrets(sources, development, instance)
    metrics = read_metrics(sources)
    site = read_site(sources, development, served)
    auth_url: str = site["auth_url"]
    database = read_database(sources, instance, development)
    providers = read_providers(sources, development)
    pages = read_pages(sources)
    passkeys = read_passkeys(sources, development, auth_url)
    bounds = read_provider_bounds(sources)
    email = read_email(sources, auth_url, instance)
    # Notices go wherever mail can be delivered: a mail server, the application's own
    # transport, or the development outbox.
    can_mail = email["email_server"] is not None or own_mail_transport or development
    audit = read_audit(sources, can_mail=can_mail)
    sessions = read_sessions(sources)
    custom_pages = read_custom_pages(sources, auth_url)
    sources.refuse_unknown_keys()
    return Settings(
        env=env,
        log_format=log_format,
        config_path=sources.config_path,
        **keys,
        **metrics,
        **site,
        **database,
        **providers,
        **pages,
        **custom_pages,
        **passkeys,
        **bounds,
        **email,
        **audit,
        **sessions,
    )
