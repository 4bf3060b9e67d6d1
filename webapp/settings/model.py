"""The settings as the application sees them: one frozen ``Settings`` and its parts.

Every fixed default (lifetimes, limits, sizes) is written here once, as a field's default;
a default that follows other settings (development, AUTH_URL's host, the instance folder)
is its section reader's.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from ipaddress import IPv4Network, IPv6Network
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, current_app


class ConfigError(Exception):
    """A setting is missing or invalid; the message names it."""


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
    #: How long a session lives from its last extension (Auth.js's ``maxAge``).
    session_max_age: timedelta = timedelta(days=30)
    #: A session read when it is older than this is extended (Auth.js's ``updateAge``): one
    #: ``UPDATE``, the cookie re-sent; younger, a read writes nothing.
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
    #: since a request holds at most one at a time on the hot path (docs/how-to/deploy.md,
    #: "Sizing workers").
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
    #: A sign-in method (provider, password, passkey) added to or removed from the account,
    #: or the e-mail address changed (to the old address):
    notice_methods: bool = True
    #: "Sign out everywhere else" ended other sessions:
    notice_other_sessions: bool = True
    #: The account was deleted (to the address it had):
    notice_account_deleted: bool = True
    #: The application's own pages in place of ours (Auth.js's ``pages``; AUTH_PAGES_*), by
    #: the route each replaces (``signin``, ``signout``, ``error``, ``verify-request``): a
    #: path on this site, with its query if it has one.
    custom_pages: Mapping[str, str] = field(default_factory=dict)
    #: The pages' language when neither the person's choice nor their browser's names a
    #: shipped one (AUTH_DEFAULT_LOCALE; ``webapp.i18n`` checks it against the catalogues).
    default_locale: str = "en"
    #: How log lines are written (AUTH_LOG_FORMAT): ``text``, or ``json`` for a machine to
    #: read, one object per line (``webapp.telemetry.jsonlines``).
    log_format: str = "text"
    #: The bearer token ``GET /metrics`` asks for (AUTH_METRICS_TOKEN); None: not served.
    #: Left out of ``repr``: settings that reach a log or a traceback show no secret.
    metrics_token: str | None = field(default=None, repr=False)

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
