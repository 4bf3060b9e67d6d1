"""The public base URL and origin of the auth routes, from AUTH_URL or a trusted proxy."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import current_app, request

from ..settings import Settings


def settings() -> Settings:
    """Return the running application's settings."""
    settings: Settings = current_app.extensions["webapp.settings"]
    return settings


def origin() -> str:
    """Return ``scheme://host[:port]`` of the site, e.g. ``https://example.com``.

    With AUTH_TRUST_HOST the request's host is used (ProxyFix has applied the forwarded
    headers); otherwise AUTH_URL is the only source, so a forged Host header cannot steer
    links or redirects.
    """
    conf = settings()
    if conf.trust_host and request:
        return request.host_url.rstrip("/")
    return conf.origin


def base_url() -> str:
    """Return the absolute auth base URL, e.g. ``https://example.com/auth``."""
    return origin() + settings().base_path


def auth_url(action: str, **params: str | None) -> str:
    """Return the absolute URL of one auth action with the given query parameters."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base_url()}/{action}" + (f"?{query}" if query else "")
