"""Typed settings: read once at start-up from the environment and the optional TOML file.

This is the only module that looks at ``os.environ``. Every default (lifetimes, limits,
sizes) is written here once. A bad setting stops start-up with a ``ConfigError`` whose
message names the setting or provider at fault; secrets never appear in that message.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import click
from flask import Flask, current_app

log = logging.getLogger(__name__)

ENVIRONMENTS = ("development", "production")
#: The development AUTH_URL when none is given: ``localhost`` (a domain name, so passkeys
#: work; browsers refuse an IP address as their relying party) on the port ``flask run``
#: serves (its default when another server runs the app).
DEV_AUTH_URL = "http://localhost:{port}/auth"
DEV_PORT = 5000
MIN_SECRET_LENGTH = 32
PROVIDER_ID_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: DATABASE_POOLER: what stands between the app and PostgreSQL. ``transaction``: a pooler
#: that hands each transaction to any server connection (PgBouncer ``pool_mode =
#: transaction``), so nothing may outlive a transaction on a connection (docs/scaling.md).
POOLERS = ("none", "transaction")
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


class ConfigError(Exception):
    """A setting is missing or invalid; the message names it."""


@dataclass(frozen=True)
class DevServer:
    """Where ``flask run`` serves the app: what its options (``--host``/``-h``,
    ``--port``/``-p``, ``--cert``) or ``FLASK_RUN_HOST``/``FLASK_RUN_PORT`` said."""

    host: str
    port: int
    https: bool = False

    @property
    def public_host(self) -> str:
        """The host name links name: ``localhost`` for a loopback or wildcard address
        (``127.0.0.1``, ``::1``, ``0.0.0.0``), else the address or name it binds."""
        name = self.host.strip().strip("[]").lower()
        try:
            address = ip_address(name)
        except ValueError:
            return name or "localhost"
        if address.is_loopback or address.is_unspecified:
            return "localhost"
        return f"[{name}]" if address.version == 6 else name

    def url(self, path: str = "/auth") -> str:
        scheme = "https" if self.https else "http"
        return f"{scheme}://{self.public_host}:{self.port}{path}"


def dev_server() -> DevServer | None:
    """Return where ``flask run`` will serve, when the app is being loaded by it.

    ``flask run`` loads the app (``create_app``) after click has read its options, so the
    port is known whichever way it was given; under another server (granian, a test
    client) there is no such command and this returns None.
    """
    from flask.cli import run_command

    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.command is not run_command:
        return None
    return DevServer(
        host=str(ctx.params.get("host") or "127.0.0.1"),
        port=int(ctx.params.get("port") or 0),
        https=ctx.params.get("cert") is not None,
    )


@dataclass(frozen=True)
class Brand:
    """How the pages present the product."""

    name: str = "Webapp"
    #: Path under /static or an absolute same-origin URL; no remote images by default.
    logo: str | None = None
    #: The accent colour, a CSS hex colour.
    color: str = "#2f5fd0"


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` events per ``window`` for one key."""

    limit: int
    window: timedelta


@dataclass(frozen=True)
class TrustedProxies:
    """The reverse proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` we believe.

    Either a number of hops (every request passes through exactly that many proxies, and
    the app is reachable through them only) or the proxies' addresses (safer: a client
    that reaches the app directly is never believed). Empty: no proxy is trusted.
    """

    hops: int = 0
    networks: tuple[IPv4Network | IPv6Network, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.hops or self.networks)

    def describe(self) -> str:
        if self.networks:
            return "proxies at " + ", ".join(str(n) for n in self.networks)
        if self.hops:
            return f"{self.hops} proxy hop{'s' if self.hops > 1 else ''} in front of every request"
        return "no proxy (X-Forwarded-* headers are ignored)"


@dataclass(frozen=True)
class Settings:
    """Everything the application reads from its configuration."""

    env: str
    #: The key material every derived key comes from (see ``derive_key``).
    secret: str
    #: Older secrets, accepted for reading only while a rotation is under way.
    previous_secrets: tuple[str, ...]
    #: The public auth base URL, e.g. ``https://example.com/auth`` (no trailing slash): the
    #: only source of every absolute URL the app builds.
    auth_url: str
    #: Proxies whose forwarded client address and scheme are believed (never their host).
    trusted_proxies: TrustedProxies
    database_url: str
    config_path: str | None
    email_server: str | None
    email_from: str
    #: Provider declarations as given (TOML tables or presets from the environment);
    #: each provider kind validates its own entries.
    provider_configs: tuple[Mapping[str, Any], ...]
    brand: Brand = field(default_factory=Brand)
    #: Host names besides AUTH_URL's that requests may name (aliases a proxy forwards).
    allowed_hosts: tuple[str, ...] = ()
    #: AUTH_URL was not given (development only) and no ``flask run`` port is known (another
    #: server runs the app): links follow a loopback or allowed host the request names.
    auth_url_from_request: bool = False
    #: The demo credentials hook accepts any address with ``DEMO_PASSWORD``. Development only.
    demo_credentials: bool = False
    session_max_age: timedelta = timedelta(days=30)
    session_update_age: timedelta = timedelta(days=1)
    #: Longest a session lives from its sign-in, however often it is used (then a new one).
    session_max_age_absolute: timedelta = timedelta(days=90)
    #: Live sessions one user may hold; a new sign-in ends the least recently used beyond it.
    max_sessions_per_user: int = 50
    #: ``Strict-Transport-Security`` max-age in seconds on an https AUTH_URL; 0: no header.
    hsts_max_age: int = 31536000
    #: Add ``includeSubDomains`` to HSTS (only when every subdomain serves https).
    hsts_include_subdomains: bool = False
    #: Failed credentials attempts allowed per client address (IPv6: per /64) per window.
    credentials_ip_limit: RateLimit = RateLimit(20, timedelta(minutes=15))
    #: Failed attempts per identifier (e.g. e-mail) from one client address, or from one
    #: browser that has signed in as that identifier before: the strict limit.
    credentials_identifier_ip_limit: RateLimit = RateLimit(5, timedelta(minutes=15))
    #: Failed attempts per identifier from all browsers that never signed in as it: the
    #: looser limit against a guess spread over many addresses.
    credentials_identifier_limit: RateLimit = RateLimit(20, timedelta(minutes=15))
    #: Client log beacons accepted per IP per window.
    log_beacon_limit: RateLimit = RateLimit(60, timedelta(minutes=1))
    #: Authorization codes a client address (IPv6: per /64) has us exchange at a provider's
    #: token endpoint per window; an exchange that succeeds gives its count back.
    oauth_ip_limit: RateLimit = RateLimit(20, timedelta(minutes=15))
    #: Device sign-ins started per client address per window: each asks the provider for
    #: a code and keeps a row.
    device_ip_limit: RateLimit = RateLimit(10, timedelta(minutes=15))
    #: Device sign-ins in progress at once, all clients together (unexpired rows of
    #: ``device_requests``); a start beyond it is refused before the provider is asked.
    max_device_requests: int = 1000
    #: Passkey options, and passkey answers, each counted per client address per window:
    #: an answer spends its challenge as a row.
    passkey_ip_limit: RateLimit = RateLimit(60, timedelta(minutes=15))
    #: Bearer tokens not in the introspection cache, per client address per window: each
    #: is a request to the provider's introspection endpoint.
    bearer_ip_limit: RateLimit = RateLimit(300, timedelta(minutes=15))
    #: Largest accepted client log beacon body, in bytes.
    log_beacon_max_bytes: int = 4096
    #: Longest user agent string kept on a session row.
    user_agent_max_length: int = 512
    #: How recent a sign-in must be to change how someone signs in or to delete the
    #: account (a fresh proof of presence; AUTH_REAUTH_MAX_AGE).
    account_reauth_window: timedelta = timedelta(minutes=10)
    #: Offer passkeys (provider ``passkey``, type ``webauthn``; AUTH_PASSKEYS).
    passkeys: bool = False
    #: A parent domain of AUTH_URL's host to register passkeys for (AUTH_PASSKEY_RP_ID), so
    #: they work across that domain's sites; None: the site's own host.
    passkey_rp_id: str | None = None
    #: Wrong second-factor codes allowed per user per window (AUTH_SECOND_FACTOR_LIMIT).
    second_factor_user_limit: RateLimit = RateLimit(5, timedelta(minutes=15))
    #: Wrong second-factor codes allowed per client address per window.
    second_factor_ip_limit: RateLimit = RateLimit(20, timedelta(minutes=15))
    #: Seconds to wait for a TCP connection to an identity provider.
    http_connect_timeout: float = 5.0
    #: Seconds to wait for an identity provider's answer once connected.
    http_read_timeout: float = 10.0
    #: Least time between two JWKS refetches caused by unknown ``kid``s, so a burst of
    #: forged tokens cannot make us hammer the provider (key rotation still works).
    jwks_refetch_interval: timedelta = timedelta(minutes=1)
    #: How long the state, PKCE and nonce cookies of an OAuth sign-in live (docs/constants.md).
    oauth_check_max_age: timedelta = timedelta(seconds=900)
    #: Lifetime of the JWTs we sign to authenticate at token endpoints (docs/constants.md).
    client_assertion_lifetime: timedelta = timedelta(seconds=60)
    #: A stored provider access token expiring within this is refreshed before it is handed
    #: out (``provider_access_token``, ``GET {AUTH_URL}/token/<provider>``).
    provider_token_refresh_margin: timedelta = timedelta(seconds=60)
    #: Longest an introspected bearer token's answer is reused (never past its ``exp``).
    bearer_cache_ttl: timedelta = timedelta(seconds=60)
    #: Clock skew tolerated on ID token ``exp`` and ``iat``.
    id_token_leeway: timedelta = timedelta(seconds=60)
    #: Database connections each worker process keeps (PostgreSQL): one per server thread,
    #: since a request holds at most one at a time on the hot path (README, Production).
    db_pool_size: int = 10
    #: Extra connections a worker may open under bursts beyond ``db_pool_size``.
    db_max_overflow: int = 5
    #: Test each pooled connection with ``SELECT 1`` before use. Off: that is a second round
    #: trip on every session read; a connection the server dropped fails one request, and
    #: the pool then discards all its connections. On for networks that cut idle connections.
    db_pool_pre_ping: bool = False
    #: A pooler in transaction mode stands before PostgreSQL (DATABASE_POOLER=transaction):
    #: no server-side prepared statements, no session state (docs/scaling.md).
    transaction_pooler: bool = False
    #: A connection straight to PostgreSQL, past the pooler (DATABASE_DIRECT_URL): where
    #: ``flask auth migrate`` holds its lock and runs the migrations. None: DATABASE_URL.
    database_direct_url: str | None = None
    #: ``scripts/serve`` runs ``flask auth migrate`` before serving (MIGRATE_ON_START).
    migrate_on_start: bool = False
    #: Add ``X-SQL-Statements`` and ``X-SQL-Writes`` to every response (the benchmark's
    #: per-request SQL count; off in normal operation).
    sql_count_headers: bool = False
    #: E-mail messages per address requested from one client address, or from one browser
    #: that has signed in as that address before; further requests send nothing.
    email_address_ip_limit: RateLimit = RateLimit(3, timedelta(minutes=10))
    #: E-mail messages per address requested from browsers that never signed in as it,
    #: whatever their addresses: the looser limit against mail bombing from many addresses.
    email_address_limit: RateLimit = RateLimit(10, timedelta(hours=1))
    #: E-mail links requested per client IP per window, whatever the addresses.
    email_ip_limit: RateLimit = RateLimit(20, timedelta(minutes=10))
    #: How long an e-mail link and its one-time code stay valid (docs/constants.md).
    email_token_max_age: timedelta = timedelta(hours=24)
    #: Wrong one-time codes allowed per request; the last of them burns the request.
    email_code_max_attempts: int = 5
    #: Seconds to wait for the SMTP server to connect and for each of its replies.
    email_timeout: float = 10.0
    #: The message's subject, a Jinja template that sees ``site`` and ``host``; None: the
    #: built-in one, in the reader's language.
    email_subject: str | None = None
    #: A folder whose ``signin.txt`` / ``signin.html`` replace the built-in message templates.
    email_templates: str | None = None
    #: Where the development outbox writes messages when EMAIL_SERVER is unset.
    email_outbox: str = "instance/outbox"
    #: A CA bundle to trust for the SMTP server's certificate (a private CA); default: system.
    email_ca_file: str | None = None
    #: How long the audit trail keeps an event; ``flask auth cleanup`` deletes older ones.
    audit_retention: timedelta = timedelta(days=180)
    #: Refusals naming no user that the audit trail records per client address per window;
    #: past it the first is one ``signin.throttled`` row and the others are only logged.
    audit_failure_ip_limit: RateLimit = RateLimit(100, timedelta(minutes=15))
    #: A sign-in from a device (browser, system, network) not seen signing in as the user
    #: for this long is new: the "new device" notice (fixed).
    new_device_window: timedelta = timedelta(days=90)
    #: Security notices by e-mail, each on its own switch; on by default wherever mail can
    #: be delivered (EMAIL_SERVER, or the development outbox). A sign-in from a new device:
    notice_new_device: bool = True
    #: A sign-in method (provider, password, passkey) added to or removed from the account:
    notice_methods: bool = True
    #: "Sign out everywhere else" ended other sessions:
    notice_other_sessions: bool = True
    #: The account was deleted (to the address it had):
    notice_account_deleted: bool = True
    #: The pages' language when neither the person's choice nor their browser's names a
    #: shipped one (AUTH_DEFAULT_LOCALE; ``webapp.i18n`` checks it against the catalogues).
    default_locale: str = "en"

    @property
    def is_development(self) -> bool:
        return self.env == "development"

    @property
    def is_https(self) -> bool:
        return self.auth_url.startswith("https://")

    @property
    def base_path(self) -> str:
        """The path prefix of the auth routes, e.g. ``/auth``."""
        return urlsplit(self.auth_url).path.rstrip("/") or ""

    @property
    def origin(self) -> str:
        parts = urlsplit(self.auth_url)
        return f"{parts.scheme}://{parts.netloc}"

    def derive_key(self, purpose: str, secret: str | None = None) -> bytes:
        """Return a 32-byte key for one purpose, so no two uses share key material."""
        material = (secret if secret is not None else self.secret).encode()
        return hmac.new(material, b"webapp-auth:" + purpose.encode(), hashlib.sha256).digest()

    def derive_keys(self, purpose: str) -> list[bytes]:
        """Return the current key for ``purpose`` first, then those of previous secrets."""
        return [self.derive_key(purpose, s) for s in (self.secret, *self.previous_secrets)]


#: Where ``create_app`` keeps the settings (``app.extensions``).
EXTENSION_KEY = "webapp.settings"


def current_settings() -> Settings:
    """Return the running application's settings: the one way code reads them."""
    conf: Settings = current_app.extensions[EXTENSION_KEY]
    return conf


def install(app: Flask, conf: Settings) -> None:
    """Make ``conf`` the settings of ``app`` (``create_app`` calls this once)."""
    app.extensions[EXTENSION_KEY] = conf


def load_settings(
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    instance_path: str | os.PathLike[str] = "instance",
    served: DevServer | None = None,
) -> Settings:
    """Build the settings from the environment, the TOML file and explicit overrides.

    Precedence, lowest first: built-in defaults, the TOML file's ``[auth]`` table, the
    environment, ``overrides`` (used by tests and embedding applications). ``served``:
    where ``flask run`` serves (``dev_server()``); in development without AUTH_URL, the
    site's address is taken from it.
    """
    env_vars: dict[str, Any] = dict(os.environ if environ is None else environ)
    env_vars.update(overrides or {})

    config_path = _opt_str(env_vars.get("AUTH_CONFIG"))
    toml_auth, toml_providers = _read_toml(config_path)

    def get(name: str, toml_key: str | None = None) -> Any:
        if name in env_vars and env_vars[name] not in (None, ""):
            return env_vars[name]
        if toml_key and toml_key in toml_auth:
            return toml_auth[toml_key]
        return None

    def rate(name: str, field_name: str) -> RateLimit:
        """Parse the limit setting ``name`` (TOML key: the field's name), or its default."""
        default: RateLimit = getattr(Settings, field_name)
        return _parse_rate(name, get(name, field_name), default)

    env = str(get("APP_ENV", "env") or "production").strip().lower()
    if env not in ENVIRONMENTS:
        raise ConfigError(f"APP_ENV must be one of {', '.join(ENVIRONMENTS)}; got {env!r}")
    development = env == "development"

    secret = _opt_str(get("AUTH_SECRET", "secret"))
    if secret is None:
        if not development:
            raise ConfigError(
                "AUTH_SECRET is required outside development: set it to at least "
                f'{MIN_SECRET_LENGTH} random bytes, e.g. `python -c "import secrets; '
                'print(secrets.token_urlsafe(48))"`'
            )
        secret = _development_secret(Path(instance_path))
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(f"AUTH_SECRET must be at least {MIN_SECRET_LENGTH} characters long")
    previous = tuple(
        s.strip() for s in str(get("AUTH_PREVIOUS_SECRETS") or "").split(",") if s.strip()
    )

    auth_url = _opt_str(get("AUTH_URL", "url"))
    # Development without AUTH_URL under a server whose port is unknown (not `flask run`):
    # links follow the loopback name and port the browser used (webapp.auth.urls).
    auth_url_from_request = auth_url is None and served is None
    if auth_url is None:
        if not development:
            raise ConfigError(
                "AUTH_URL is required outside development, e.g. https://example.com/auth"
            )
        auth_url = _development_auth_url(served)
    auth_url = _validate_auth_url(auth_url)
    if development and served is not None:
        _warn_if_served_elsewhere(auth_url, served)
    trusted_proxies = _parse_trusted_proxies(
        get("AUTH_TRUSTED_PROXIES", "trusted_proxies"),
        _parse_bool("AUTH_TRUST_HOST", get("AUTH_TRUST_HOST", "trust_host")),
    )
    allowed_hosts = _parse_hosts(get("AUTH_ALLOWED_HOSTS", "allowed_hosts"))

    database_url = _opt_str(get("DATABASE_URL", "database_url"))
    if database_url is None:
        database_url = "sqlite:///" + str(Path(instance_path).resolve() / "webapp.sqlite3")
    database_url = _with_driver(database_url)
    database_direct_url = _opt_str(get("DATABASE_DIRECT_URL", "database_direct_url"))
    if database_direct_url is not None:
        database_direct_url = _with_driver(database_direct_url)
    pooler = str(get("DATABASE_POOLER", "database_pooler") or "none").strip().lower()
    if pooler not in POOLERS:
        raise ConfigError(f"DATABASE_POOLER must be one of {', '.join(POOLERS)}; got {pooler!r}")
    migrate_on_start = bool(_parse_bool("MIGRATE_ON_START", get("MIGRATE_ON_START")))
    _check_database_path(
        database_url,
        database_direct_url,
        transaction_pooler=pooler == "transaction",
        migrate_on_start=migrate_on_start,
    )

    demo = _parse_bool("AUTH_DEMO_CREDENTIALS", get("AUTH_DEMO_CREDENTIALS", "demo_credentials"))
    if demo is None:
        demo = development
    if demo and not development:
        raise ConfigError(
            "AUTH_DEMO_CREDENTIALS accepts any address with a fixed password and cannot be "
            "enabled outside development (APP_ENV=development)"
        )

    email_server = _opt_str(get("EMAIL_SERVER", "email_server"))
    email_from = _opt_str(get("EMAIL_FROM", "email_from")) or (
        f"no-reply@{urlsplit(auth_url).hostname}"
    )

    brand_table = toml_auth.get("brand", {})
    if not isinstance(brand_table, Mapping):
        raise ConfigError("[auth.brand] must be a table")
    brand = Brand(
        name=str(get("AUTH_BRAND_NAME") or brand_table.get("name") or Brand.name),
        logo=_opt_str(get("AUTH_BRAND_LOGO") or brand_table.get("logo")),
        color=str(get("AUTH_BRAND_COLOR") or brand_table.get("color") or Brand.color),
    )
    if not re.fullmatch(r"#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?", brand.color):
        raise ConfigError(
            f"AUTH_BRAND_COLOR must be a hex colour like #2f5fd0; got {brand.color!r}"
        )

    provider_configs = tuple(_secret_from_env(p, env_vars) for p in toml_providers) + tuple(
        _presets_from_env(env_vars)
    )
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

    passkeys = _parse_bool("AUTH_PASSKEYS", get("AUTH_PASSKEYS", "passkeys"))
    rp_id = _opt_str(get("AUTH_PASSKEY_RP_ID", "passkey_rp_id"))
    host = urlsplit(auth_url).hostname or ""
    if rp_id is not None:
        rp_id = rp_id.lower()
        if host != rp_id and not host.endswith("." + rp_id):
            raise ConfigError(
                f"AUTH_PASSKEY_RP_ID {rp_id!r} must be AUTH_URL's host {host!r} or a parent "
                "domain of it (browsers refuse any other)"
            )

    if passkeys and not development and rp_id is None and is_ip_address(host):
        raise ConfigError(
            f"AUTH_PASSKEYS needs a domain name: AUTH_URL's host {host!r} is an IP address, "
            "which browsers refuse for passkeys"
        )

    # Notices go wherever mail can be delivered; one asked for where none can stops start-up.
    can_mail = email_server is not None or development

    def notice(name: str, field_name: str) -> bool:
        wanted = _parse_bool(name, get(name, field_name))
        if wanted and not can_mail:
            raise ConfigError(f"{name} needs EMAIL_SERVER: outside development no mail is sent")
        return can_mail if wanted is None else wanted

    pool_size = _parse_int("DB_POOL_SIZE", get("DB_POOL_SIZE"), Settings.db_pool_size, 1)
    max_overflow = _parse_int(
        "DB_MAX_OVERFLOW", get("DB_MAX_OVERFLOW"), Settings.db_max_overflow, 0
    )

    return Settings(
        env=env,
        secret=secret,
        previous_secrets=previous,
        auth_url=auth_url,
        trusted_proxies=trusted_proxies,
        allowed_hosts=allowed_hosts,
        auth_url_from_request=auth_url_from_request,
        database_url=database_url,
        config_path=config_path,
        email_server=email_server,
        email_from=email_from,
        provider_configs=provider_configs,
        brand=brand,
        demo_credentials=demo,
        passkeys=development if passkeys is None else passkeys,
        passkey_rp_id=rp_id,
        second_factor_user_limit=rate("AUTH_SECOND_FACTOR_LIMIT", "second_factor_user_limit"),
        second_factor_ip_limit=rate("AUTH_SECOND_FACTOR_IP_LIMIT", "second_factor_ip_limit"),
        oauth_ip_limit=rate("AUTH_OAUTH_IP_LIMIT", "oauth_ip_limit"),
        device_ip_limit=rate("AUTH_DEVICE_IP_LIMIT", "device_ip_limit"),
        max_device_requests=_parse_int(
            "AUTH_MAX_DEVICE_REQUESTS",
            get("AUTH_MAX_DEVICE_REQUESTS", "max_device_requests"),
            Settings.max_device_requests,
            1,
        ),
        passkey_ip_limit=rate("AUTH_PASSKEY_IP_LIMIT", "passkey_ip_limit"),
        bearer_ip_limit=rate("AUTH_BEARER_IP_LIMIT", "bearer_ip_limit"),
        http_connect_timeout=_parse_seconds(
            "AUTH_HTTP_CONNECT_TIMEOUT",
            get("AUTH_HTTP_CONNECT_TIMEOUT", "http_connect_timeout"),
            Settings.http_connect_timeout,
        ),
        http_read_timeout=_parse_seconds(
            "AUTH_HTTP_READ_TIMEOUT",
            get("AUTH_HTTP_READ_TIMEOUT", "http_read_timeout"),
            Settings.http_read_timeout,
        ),
        email_address_limit=rate("EMAIL_ADDRESS_LIMIT", "email_address_limit"),
        email_address_ip_limit=rate("EMAIL_ADDRESS_IP_LIMIT", "email_address_ip_limit"),
        credentials_ip_limit=rate("AUTH_CREDENTIALS_IP_LIMIT", "credentials_ip_limit"),
        credentials_identifier_ip_limit=rate(
            "AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT", "credentials_identifier_ip_limit"
        ),
        credentials_identifier_limit=rate(
            "AUTH_CREDENTIALS_IDENTIFIER_LIMIT", "credentials_identifier_limit"
        ),
        account_reauth_window=timedelta(
            seconds=_parse_int(
                "AUTH_REAUTH_MAX_AGE",
                get("AUTH_REAUTH_MAX_AGE", "reauth_max_age"),
                int(Settings.account_reauth_window.total_seconds()),
                1,
            )
        ),
        provider_token_refresh_margin=timedelta(
            seconds=_parse_int(
                "AUTH_TOKEN_REFRESH_MARGIN",
                get("AUTH_TOKEN_REFRESH_MARGIN", "token_refresh_margin"),
                int(Settings.provider_token_refresh_margin.total_seconds()),
                0,
            )
        ),
        bearer_cache_ttl=timedelta(
            seconds=_parse_int(
                "AUTH_BEARER_CACHE_TTL",
                get("AUTH_BEARER_CACHE_TTL", "bearer_cache_ttl"),
                int(Settings.bearer_cache_ttl.total_seconds()),
                0,
            )
        ),
        email_ip_limit=rate("EMAIL_IP_LIMIT", "email_ip_limit"),
        email_timeout=_parse_seconds(
            "EMAIL_TIMEOUT", get("EMAIL_TIMEOUT", "email_timeout"), Settings.email_timeout
        ),
        email_subject=_opt_str(get("EMAIL_SUBJECT", "email_subject")),
        email_templates=_opt_str(get("EMAIL_TEMPLATES", "email_templates")),
        email_outbox=_opt_str(get("EMAIL_OUTBOX", "email_outbox"))
        or str(Path(instance_path).resolve() / "outbox"),
        email_ca_file=_opt_str(get("EMAIL_CA_FILE", "email_ca_file")),
        audit_retention=_parse_days(
            "AUDIT_RETENTION", get("AUDIT_RETENTION", "audit_retention"), Settings.audit_retention
        ),
        audit_failure_ip_limit=rate("AUDIT_FAILURE_IP_LIMIT", "audit_failure_ip_limit"),
        notice_new_device=notice("AUTH_NOTICE_NEW_DEVICE", "notice_new_device"),
        notice_methods=notice("AUTH_NOTICE_METHODS", "notice_methods"),
        notice_other_sessions=notice("AUTH_NOTICE_OTHER_SESSIONS", "notice_other_sessions"),
        notice_account_deleted=notice("AUTH_NOTICE_ACCOUNT_DELETED", "notice_account_deleted"),
        default_locale=_opt_str(get("AUTH_DEFAULT_LOCALE", "default_locale"))
        or Settings.default_locale,
        db_pool_size=pool_size,
        db_max_overflow=max_overflow,
        db_pool_pre_ping=bool(_parse_bool("DB_POOL_PRE_PING", get("DB_POOL_PRE_PING"))),
        transaction_pooler=pooler == "transaction",
        database_direct_url=database_direct_url,
        migrate_on_start=migrate_on_start,
        sql_count_headers=bool(_parse_bool("SQL_COUNT_HEADERS", get("SQL_COUNT_HEADERS"))),
        session_max_age_absolute=_parse_duration(
            "AUTH_SESSION_MAX_AGE_ABSOLUTE",
            get("AUTH_SESSION_MAX_AGE_ABSOLUTE", "session_max_age_absolute"),
            Settings.session_max_age_absolute,
        ),
        max_sessions_per_user=_parse_int(
            "AUTH_MAX_SESSIONS_PER_USER",
            get("AUTH_MAX_SESSIONS_PER_USER", "max_sessions_per_user"),
            Settings.max_sessions_per_user,
            1,
        ),
        hsts_max_age=_parse_int(
            "AUTH_HSTS_MAX_AGE", get("AUTH_HSTS_MAX_AGE", "hsts_max_age"), Settings.hsts_max_age, 0
        ),
        hsts_include_subdomains=bool(
            _parse_bool(
                "AUTH_HSTS_INCLUDE_SUBDOMAINS",
                get("AUTH_HSTS_INCLUDE_SUBDOMAINS", "hsts_include_subdomains"),
            )
        ),
    )


def _development_auth_url(served: DevServer | None) -> str:
    """AUTH_URL in development when none is given: where ``flask run`` serves, by name."""
    if served is None:
        return DEV_AUTH_URL.format(port=DEV_PORT)
    if served.port == 0:
        raise ConfigError(
            "flask run --port 0 picks its port after the app has started, so links could not "
            "name it: give the port (--port 5002) or set AUTH_URL"
        )
    return served.url()


def _warn_if_served_elsewhere(auth_url: str, served: DevServer) -> None:
    """A development AUTH_URL naming another port than the one served: links and redirects
    lead there. Right behind a proxy or port mapping; a mistake otherwise."""
    parts = urlsplit(auth_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if port != served.port and served.port != 0:
        log.warning(
            "AUTH_URL is %s but this server listens on port %d: every link and redirect "
            "leads to port %d. Right if a proxy or port mapping forwards it here; otherwise "
            "unset AUTH_URL (development then uses %s) or correct it",
            auth_url,
            served.port,
            port,
            served.url(),
        )


def _development_secret(instance_path: Path) -> str:
    """Return a secret kept in the instance folder, so development restarts keep sessions."""
    path = instance_path / "dev-auth-secret"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    log.warning("AUTH_SECRET is not set: generated one in %s (development only)", path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


def _with_driver(url: str) -> str:
    """Name the driver we ship (psycopg 3) in a PostgreSQL URL, so a plain libpq URL works."""
    if url.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _check_database_path(
    url: str, direct_url: str | None, *, transaction_pooler: bool, migrate_on_start: bool
) -> None:
    """Refuse the database set-ups known to fail, each only under load or at a deploy.

    Behind a transaction pooler consecutive transactions may run on different server
    connections: the migrations' advisory lock must be taken past it, and nothing that
    sets state for a whole connection (startup ``options``, prepared statements) may be
    asked for. Only hosts and ports are compared; credentials never reach a message.
    """
    if direct_url is not None and not direct_url.startswith("postgresql"):
        raise ConfigError("DATABASE_DIRECT_URL must be a PostgreSQL URL (postgresql://…)")
    if not transaction_pooler:
        return
    if not url.startswith("postgresql"):
        raise ConfigError("DATABASE_POOLER=transaction needs a PostgreSQL DATABASE_URL")
    query = parse_qs(urlsplit(url).query)
    if "prepare_threshold" in query:
        raise ConfigError(
            "DATABASE_URL sets prepare_threshold, but behind a transaction pooler "
            "(DATABASE_POOLER=transaction) a statement prepared on one server connection "
            "is missing on the next: remove it (the app turns prepared statements off)"
        )
    if "options" in query:
        raise ConfigError(
            "DATABASE_URL sets options, which a transaction pooler does not pass on to each "
            "server connection (PgBouncer refuses them): set them on the role or database "
            "instead (ALTER ROLE … SET …)"
        )
    if migrate_on_start and direct_url is None:
        raise ConfigError(
            "MIGRATE_ON_START with DATABASE_POOLER=transaction needs DATABASE_DIRECT_URL: "
            "the migrations' lock is held on a connection straight to PostgreSQL, which a "
            "transaction pooler cannot keep"
        )
    if direct_url is not None and _host_port(direct_url) == _host_port(url):
        raise ConfigError(
            "DATABASE_DIRECT_URL names the same host and port as DATABASE_URL, which is the "
            "transaction pooler: it must reach PostgreSQL directly"
        )


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or 5432)


def is_loopback_url(url: str) -> bool:
    """Return whether ``url`` points at this machine (plain http is tolerated there)."""
    return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS


def _validate_auth_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"AUTH_URL must be an absolute http(s) URL; got {url!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError("AUTH_URL must not carry a query, fragment or user information")
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc.lower()}{path}"


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


def _secret_from_env(provider: dict[str, Any], env_vars: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve ``client_secret_env = "NAME"`` so secrets can stay out of the TOML file."""
    name = provider.get("client_secret_env")
    if name is None:
        return provider
    secret = _opt_str(env_vars.get(str(name)))
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
        client_id = _opt_str(env_vars.get(f"{prefix}_ID"))
        if client_id is None:
            continue
        entry: dict[str, Any] = {
            "id": preset,
            "type": "preset",
            "preset": preset,
            "client_id": client_id,
        }
        for suffix in ("SECRET", "ISSUER"):
            value = _opt_str(env_vars.get(f"{prefix}_{suffix}"))
            if value is not None:
                entry[f"client_{suffix.lower()}" if suffix == "SECRET" else "issuer"] = value
        found.append(entry)
    return found


def _parse_trusted_proxies(value: Any, trust_host: bool | None) -> TrustedProxies:
    """Parse ``AUTH_TRUSTED_PROXIES``: a hop count (``1``) or addresses and networks.

    ``AUTH_TRUST_HOST=true`` without it keeps its old meaning, narrowed: one proxy hop,
    believed for the client's address and scheme only (never for the host).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return TrustedProxies(hops=1) if trust_host else TrustedProxies()
    items = value if isinstance(value, list) else str(value).split(",")
    text = [str(item).strip() for item in items if str(item).strip()]
    if len(text) == 1 and text[0].isdigit():
        hops = int(text[0])
        if hops > 10:
            raise ConfigError(f"AUTH_TRUSTED_PROXIES: {hops} hops is not a set-up (at most 10)")
        return TrustedProxies(hops=hops)
    networks = []
    for item in text:
        try:
            networks.append(ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(
                "AUTH_TRUSTED_PROXIES must be a number of proxy hops (e.g. 1) or proxy "
                f"addresses and networks (e.g. 127.0.0.1/32,10.0.0.0/8); got {item!r}"
            ) from None
    return TrustedProxies(networks=tuple(networks))


_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST_RE = re.compile(rf"^(?:{_LABEL}\.)*{_LABEL}$")


def _parse_hosts(value: Any) -> tuple[str, ...]:
    """Parse ``AUTH_ALLOWED_HOSTS``: host names (no scheme, no port), comma-separated."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    hosts = []
    for item in items:
        host = str(item).strip().lower().rstrip(".")
        if not host:
            continue
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not (_HOST_RE.fullmatch(host) or is_ip_address(host)):
            raise ConfigError(
                f"AUTH_ALLOWED_HOSTS takes host names without scheme or port; got {item!r}"
            )
        hosts.append(host)
    return tuple(hosts)


def is_ip_address(text: str) -> bool:
    """Whether ``text`` is an IPv4 or IPv6 address (not a name, not a network)."""
    try:
        ip_network(text)
    except ValueError:
        return False
    return "/" not in text


_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*([smh])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _parse_rate(name: str, value: Any, default: RateLimit) -> RateLimit:
    """Parse ``"<count>/<window>"`` such as ``3/10m``, ``20/600s`` or ``100/1h``."""
    if value is None:
        return default
    match = _RATE_RE.match(str(value))
    if match is None or int(match[1]) < 1 or int(match[2]) < 1:
        raise ConfigError(f"{name} must look like 3/10m (count/window in s, m or h); got {value!r}")
    seconds = int(match[2]) * _UNIT_SECONDS[match[3]]
    return RateLimit(int(match[1]), timedelta(seconds=seconds))


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _parse_int(name: str, value: Any, default: int, minimum: int) -> int:
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number; got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}; got {number}")
    return number


#: Longest duration a setting may name, about 100 years: later dates would overflow.
_MAX_DURATION_SECONDS = 100 * 365 * 86400


def _parse_duration(name: str, value: Any, default: timedelta) -> timedelta:
    """Parse a lifetime given in whole seconds, as Auth.js's ``maxAge`` (``7776000``: 90 days)."""
    if value is None:
        return default
    text = str(value).strip()
    whole = not isinstance(value, bool) and text.isascii() and text.isdigit()
    if not whole or not 0 < int(text) <= _MAX_DURATION_SECONDS:
        raise ConfigError(
            f"{name} must be a whole number of seconds, at least 1 (90 days: 7776000); "
            f"got {value!r}"
        )
    return timedelta(seconds=int(text))


def _parse_days(name: str, value: Any, default: timedelta) -> timedelta:
    """Parse a period given in whole days (``180``), at most about 100 years."""
    days = _parse_int(name, value, default.days, 1)
    if days * 86400 > _MAX_DURATION_SECONDS:
        raise ConfigError(f"{name} must be at most {_MAX_DURATION_SECONDS // 86400} days")
    return timedelta(days=days)


def _parse_seconds(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= 300:
        raise ConfigError(f"{name} must be a number of seconds between 0 and 300; got {value!r}")
    return seconds


def _parse_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false; got {value!r}")
