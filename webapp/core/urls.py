"""The site's public address: every absolute URL the app builds comes from AUTH_URL.

Never from the request: a forged ``Host`` or ``X-Forwarded-Host`` must not be able to put
another site into a sign-in link, a redirect or an OAuth ``redirect_uri`` (docs/security.md,
"The site's address"). The one exception is development without AUTH_URL, where links
follow the host the browser used if it is a loopback name or listed in AUTH_ALLOWED_HOSTS.
"""

from __future__ import annotations

from typing import Literal
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
    return f"{base_url()}/{action}" + _query("?", params)


#: The pages an application may replace with its own (Auth.js's ``pages``), by route.
Page = Literal["signin", "signout", "error", "verify-request"]


def page_url(page: Page, **params: str | None) -> str:
    """Return the absolute URL that sends a browser to one of the auth pages, with the
    given query parameters: the application's own page when an AUTH_PAGES_* setting names
    one, else ours (which stays at its route either way)."""
    custom = current_settings().custom_pages.get(page)
    if custom is None:
        return auth_url(page, **params)
    return origin() + custom + _query("&" if "?" in custom else "?", params)


def page_path(page: Page, **params: str | None) -> str:
    """``page_url`` as a path on this site, for the pages' own links."""
    conf = current_settings()
    path = conf.custom_pages.get(page) or f"{conf.base_path}/{page}"
    return path + _query("&" if "?" in path else "?", params)


def _query(separator: str, params: dict[str, str | None]) -> str:
    """``separator`` and the query of the parameters that have a value, or nothing."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return separator + query if query else ""
