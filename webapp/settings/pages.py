"""How the pages present the product (its name, logo and colour, and their default
language), and which of them the application replaces with its own (Auth.js's ``pages``).

The brand and the pages may also be TOML tables (``[auth.brand]``, ``[auth.pages]``); the
environment wins key by key.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from webapp.settings.model import Brand, ConfigError, Settings
from webapp.settings.parsers import nearest, opt_str
from webapp.settings.sources import Setting, Sources, declare

#: The pages an application may replace: the setting, its ``[auth.pages]`` key (Auth.js's
#: name) and the route of ours it replaces.
CUSTOM_PAGES = (
    ("AUTH_PAGES_SIGNIN", "signIn", "signin"),
    ("AUTH_PAGES_SIGNOUT", "signOut", "signout"),
    ("AUTH_PAGES_ERROR", "error", "error"),
    ("AUTH_PAGES_VERIFY_REQUEST", "verifyRequest", "verify-request"),
)
#: What no page address holds: white space, control characters, backslashes (browsers
#: read them as ``/``) and a fragment (the query parameters we add must stay in the query).
_NOT_IN_ADDRESS = re.compile(r"[\x00-\x20\x7f\\#]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


#: The keys of ``[auth.brand]``.
_BRAND_KEYS = ("name", "logo", "color")

_PAGE_MEANING = (
    "Your own {what} page in place of ours (Auth.js's `pages`): a path on this site or an "
    "absolute URL on `AUTH_URL`'s origin. Every redirect to that page goes there with "
    "Auth.js's parameters (`callbackUrl`, `error`, `code`, `provider`, `type`); ours stays "
    "at its route, so your page can post to it."
)
_PAGE_NAMES = {
    "signin": "sign-in",
    "signout": "sign-out",
    "error": "error",
    "verify-request": '"check your e-mail"',
}

SETTINGS = declare(
    Setting(
        "AUTH_BRAND_NAME",
        "brand.name",
        "The product name on every page and in the e-mails.",
        default=f"`{Brand.name}`",
    ),
    Setting(
        "AUTH_BRAND_LOGO",
        "brand.logo",
        "A logo on every page: a path under this site (`/static/logo.svg`) or a same-origin "
        "URL; no remote image.",
        default="none",
    ),
    Setting(
        "AUTH_BRAND_COLOR",
        "brand.color",
        "The accent colour of every page, a CSS hex colour.",
        default=f"`{Brand.color}`",
    ),
    Setting(
        "AUTH_DEFAULT_LOCALE",
        "default_locale",
        "The pages' and messages' language when neither the person's choice nor the "
        "browser's `Accept-Language` names a shipped one; must be a shipped locale.",
        field="default_locale",
    ),
    *(
        Setting(
            name,
            f"pages.{key}",
            _PAGE_MEANING.format(what=_PAGE_NAMES[route]),
            default="ours",
        )
        for name, key, route in CUSTOM_PAGES
    ),
)


def read_pages(sources: Sources) -> dict[str, Any]:
    get, _ = sources.readers(SETTINGS)
    brand_table = sources.table("brand")
    for key in brand_table:
        if key not in _BRAND_KEYS:
            raise ConfigError(
                f"[auth.brand] has no key {key!r}; it takes {', '.join(_BRAND_KEYS)}"
                + nearest(key, _BRAND_KEYS)
            )
    brand = Brand(
        name=str(get("AUTH_BRAND_NAME") or Brand.name),
        logo=opt_str(get("AUTH_BRAND_LOGO")),
        color=str(get("AUTH_BRAND_COLOR") or Brand.color),
    )
    if not re.fullmatch(r"#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?", brand.color):
        raise ConfigError(
            f"AUTH_BRAND_COLOR must be a hex colour like #2f5fd0; got {brand.color!r}"
        )
    return {
        "brand": brand,
        "default_locale": opt_str(get("AUTH_DEFAULT_LOCALE")) or Settings.default_locale,
    }


def read_custom_pages(sources: Sources, auth_url: str) -> dict[str, Any]:
    """The application's own pages, each a path on this site (``custom_pages``)."""
    get, _ = sources.readers(SETTINGS)
    table = sources.table("pages")
    known = [key for _, key, _ in CUSTOM_PAGES]
    for key in table:
        if key not in known:
            raise ConfigError(
                f"[auth.pages] has no key {key!r}; it takes {', '.join(known)}"
                + nearest(key, known)
            )
    pages: dict[str, str] = {}
    for name, key, route in CUSTOM_PAGES:
        value = opt_str(get(name))
        if value is not None:
            pages[route] = _site_path(f"{name} ([auth.pages] {key})", value, auth_url)
    return {"custom_pages": pages}


def _site_path(name: str, value: str, auth_url: str) -> str:
    """The path and query of a page given as a path on this site or as an absolute URL on
    AUTH_URL's origin; anything else stops start-up naming the setting."""
    if not _NOT_IN_ADDRESS.search(value):
        if value.startswith("/") and not value.startswith("//"):
            return value
        if _origin(value) == _origin(auth_url):  # AUTH_URL's is never None
            parts = urlsplit(value)
            return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    site = urlsplit(auth_url)
    raise ConfigError(
        f"{name} must be a path on this site (/login) or an absolute URL on AUTH_URL's "
        f"origin ({site.scheme}://{site.netloc}/login); got {value!r}"
    )


def _origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL without user information, else None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is not a number, a broken IPv6 address
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    return scheme, parts.hostname, port or _DEFAULT_PORTS[scheme]
