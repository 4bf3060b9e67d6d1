"""The site's public address: every absolute URL the app builds comes from AUTH_URL.

Never from the request: a forged ``Host`` or ``X-Forwarded-Host`` must not be able to put
another site into a sign-in link, a redirect or an OAuth ``redirect_uri`` (docs/security.md,
"The site's address"). The one exception is development without AUTH_URL, where links
follow the host the browser used if it is a loopback name or listed in AUTH_ALLOWED_HOSTS.
"""

from __future__ import annotations

from urllib.parse import urlencode

from flask import has_request_context, request

from webapp.core.hosts import hostname, request_host
from webapp.settings import LOOPBACK_HOSTS, current_settings


def origin() -> str:
    """Return ``scheme://host[:port]`` of the site, e.g. ``https://example.com``."""
    conf = current_settings()
    if conf.auth_url_from_request and has_request_context():
        host = request_host()
        name = hostname(host)
        if name in LOOPBACK_HOSTS or name in conf.allowed_hosts:
            return f"{request.scheme}://{host}"
    return conf.origin


def base_url() -> str:
    """Return the absolute auth base URL, e.g. ``https://example.com/auth``."""
    return origin() + current_settings().base_path


def auth_url(action: str, **params: str | None) -> str:
    """Return the absolute URL of one auth action with the given query parameters."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base_url()}/{action}" + (f"?{query}" if query else "")
