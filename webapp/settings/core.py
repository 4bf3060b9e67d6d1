"""The core settings: the environment, the secrets, the address the site answers at, and
how log lines are written.

Every other section may depend on these (development defaults, AUTH_URL's host), so they
are read first. Development works with none of them given; production needs AUTH_SECRET
and AUTH_URL.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from ipaddress import ip_network
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from webapp.settings.model import ConfigError, Settings, TrustedProxies
from webapp.settings.parsers import opt_str, parse_bool
from webapp.settings.sources import Setting, Sources, declare

if TYPE_CHECKING:
    from webapp.settings.dev_server import DevServer

log = logging.getLogger(__name__)

ENVIRONMENTS = ("development", "production")
#: How log lines are written: plain text (the default) or one JSON object per line.
LOG_FORMATS = ("text", "json")
#: The development AUTH_URL when none is given: ``localhost`` (a domain name, so passkeys
#: work; browsers refuse an IP address as their relying party) on the port ``flask run``
#: serves (its default when another server runs the app).
DEV_AUTH_URL = "http://localhost:{port}/auth"
DEV_PORT = 5000
MIN_SECRET_LENGTH = 32
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

SETTINGS = declare(
    Setting(
        "APP_ENV",
        "env",
        "`development` or `production`. Development generates a secret, serves "
        "`http://localhost:<port>/auth`, offers the demo sign-in and the outbox; production "
        "requires `AUTH_SECRET`, `AUTH_URL` and `DATABASE_URL`.",
        default="`production` (so a forgotten setting fails safe)",
    ),
    Setting(
        "AUTH_LOG_FORMAT",
        "log_format",
        "How log lines are written: `text`, or `json`, one JSON object per line for a "
        "machine to read (access lines and the production server's own lines included).",
        field="log_format",
    ),
    Setting(
        "AUTH_SECRET",
        "secret",
        f"Key material (at least {MIN_SECRET_LENGTH} characters) for the keyed hashes, the "
        "CSRF cookie, the sealed cookies and the tokens sealed at rest.",
        default="required in production; in development one is generated once into "
        "`instance/dev-auth-secret`",
    ),
    Setting(
        "AUTH_PREVIOUS_SECRETS",
        None,
        "Old secrets, comma-separated, still accepted for reading during a rotation: tokens "
        "sealed under them are opened until `flask auth rotate-secrets` re-seals them.",
        default="none",
    ),
    Setting(
        "AUTH_URL",
        "url",
        "The public auth base URL, e.g. `https://example.com/auth`: every absolute URL the "
        "app builds starts with it, and its path is the prefix of the auth routes.",
        default="required in production; in development `http://localhost:<port>/auth`, "
        "`<port>` being the one `flask run` serves",
    ),
    Setting(
        "AUTH_TRUSTED_PROXIES",
        "trusted_proxies",
        "The reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed: "
        "a hop count (`1`, at most 10) or their addresses and networks "
        "(`127.0.0.1/32,10.0.0.0/8`).",
        default="none: forwarded headers are ignored",
    ),
    Setting(
        "AUTH_TRUST_HOST",
        "trust_host",
        "The old switch, kept as an alias: `true` without `AUTH_TRUSTED_PROXIES` means one "
        "proxy hop (client address and scheme only; links never follow a forwarded host).",
        default="`false`",
    ),
    Setting(
        "AUTH_ALLOWED_HOSTS",
        "allowed_hosts",
        "Other host names requests may name (an internal alias), comma-separated; every "
        "link still names `AUTH_URL`'s host.",
        default="none; in development, requests for `localhost`, `127.0.0.1` or `::1` that "
        "are not `AUTH_URL`'s host are redirected to it",
    ),
    Setting(
        "AUTH_METRICS_TOKEN",
        "metrics_token",
        f"The bearer token (at least {MIN_SECRET_LENGTH} characters) a Prometheus scraper "
        "sends to `GET /metrics` (`Authorization: Bearer <token>`); a secret, never logged.",
        default="none: `/metrics` is not served (404)",
    ),
)


def read_environment(sources: Sources) -> str:
    get, _ = sources.readers(SETTINGS)
    env = str(get("APP_ENV") or "production").strip().lower()
    if env not in ENVIRONMENTS:
        raise ConfigError(f"APP_ENV must be one of {', '.join(ENVIRONMENTS)}; got {env!r}")
    return env


def read_log_format(sources: Sources) -> str:
    """AUTH_LOG_FORMAT: how every line the app (and deploy/serve.py's server) logs is written."""
    given = sources.readers(SETTINGS)[0]("AUTH_LOG_FORMAT")
    log_format = str(given or Settings.log_format).strip().lower()
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"AUTH_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}; got {given!r}")
    return log_format


def read_secrets(sources: Sources, development: bool, instance_path: Path) -> dict[str, Any]:
    get, _ = sources.readers(SETTINGS)
    secret = opt_str(get("AUTH_SECRET"))
    if secret is None:
        if not development:
            raise ConfigError(
                "AUTH_SECRET is required outside development: set it to at least "
                f'{MIN_SECRET_LENGTH} random bytes, e.g. `python -c "import secrets; '
                'print(secrets.token_urlsafe(48))"`'
            )
        secret = _development_secret(instance_path)
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(f"AUTH_SECRET must be at least {MIN_SECRET_LENGTH} characters long")
    previous = tuple(
        s.strip() for s in str(get("AUTH_PREVIOUS_SECRETS") or "").split(",") if s.strip()
    )
    return {"secret": secret, "previous_secrets": previous}


def read_site(sources: Sources, development: bool, served: DevServer | None) -> dict[str, Any]:
    """AUTH_URL, and the proxies and host names requests for it may come through."""
    get, _ = sources.readers(SETTINGS)
    auth_url = opt_str(get("AUTH_URL"))
    # Development without AUTH_URL under a server whose port is unknown (not `flask run`):
    # links follow the loopback name and port the browser used (webapp.core.urls).
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
        get("AUTH_TRUSTED_PROXIES"),
        parse_bool("AUTH_TRUST_HOST", get("AUTH_TRUST_HOST")),
    )
    return {
        "auth_url": auth_url,
        "auth_url_from_request": auth_url_from_request,
        "trusted_proxies": trusted_proxies,
        "allowed_hosts": _parse_hosts(get("AUTH_ALLOWED_HOSTS")),
    }


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


def _validate_auth_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"AUTH_URL must be an absolute http(s) URL; got {url!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError("AUTH_URL must not carry a query, fragment or user information")
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc.lower()}{path}"


def is_loopback_url(url: str) -> bool:
    """Return whether ``url`` points at this machine (plain http is tolerated there)."""
    return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS


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


#: What a bearer token may hold: printable ASCII, no space (it travels in a header).
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")


def read_metrics(sources: Sources) -> dict[str, Any]:
    """AUTH_METRICS_TOKEN: what ``GET /metrics`` asks of a scraper (unset: not served).
    Checked like AUTH_SECRET; its value never appears in a message."""
    token = opt_str(sources.readers(SETTINGS)[0]("AUTH_METRICS_TOKEN"))
    if token is not None and len(token) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"AUTH_METRICS_TOKEN must be at least {MIN_SECRET_LENGTH} characters long, e.g. "
            '`python -c "import secrets; print(secrets.token_urlsafe(32))"`'
        )
    if token is not None and not _TOKEN_RE.fullmatch(token):
        raise ConfigError(
            "AUTH_METRICS_TOKEN must be printable ASCII without spaces (it is sent in an "
            "HTTP header)"
        )
    return {"metrics_token": token}
