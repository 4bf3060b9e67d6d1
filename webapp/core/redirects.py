"""Safe redirects: which callbackUrl values we follow, and the redirect hook.

The rule: a callbackUrl is accepted only as a path on this site (``/account?tab=1``) or an
absolute http(s) URL whose origin is exactly ours; the answer is always an absolute URL
built from our own origin, so the browser never has to interpret a scheme-relative or
backslashed value. Anything doubtful falls back to ``{origin}/``. Browsers strip tabs and
newlines and treat ``\\`` as ``/`` in URLs, and intermediaries may decode percent-escapes,
so those are refused outright rather than interpreted (see CVE-2021-32618 for the bug class).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit

from webapp.core import urls
from webapp.core.hooks import current_hooks

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Characters safe to leave as they are in a path + query + fragment; the rest is escaped.
_SAFE_CHARS = "/?#&=;:@!$'()*+,-._~%[]"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def safe_callback_url(value: str | None) -> str:
    """Return an absolute same-origin URL for ``value``, or ``{origin}/`` if it is unsafe."""
    site = urls.origin()
    path = _same_site_path(value, site) if value else None
    return site + path if path is not None else site + "/"


def is_safe_callback_url(value: str | None) -> bool:
    """Return whether ``value`` would be followed as given (not replaced by the fallback)."""
    return bool(value) and _same_site_path(str(value), urls.origin()) is not None


def resolve_redirect(value: str | None) -> str:
    """Return where to send the browser after a flow: the safe URL, then the app's hook."""
    url = safe_callback_url(value)
    hook = current_hooks().redirect
    return hook(url=url, base_url=urls.origin()) if hook else url


def _same_site_path(value: str, site: str) -> str | None:
    """Return the path+query+fragment of ``value`` if it stays on ``site``, else None."""
    if len(value) > 2048:
        return None
    # Look at every decoding an intermediary might apply; any of them may not be hostile.
    layers = [value]
    for _ in range(3):
        decoded = unquote(layers[-1])
        if decoded == layers[-1]:
            break
        layers.append(decoded)
    for layer in layers:
        if _CONTROL.search(layer) or "\\" in layer or layer != layer.strip():
            return None
        if layer.startswith("//"):
            return None

    if value.startswith("/"):
        parts = urlsplit(value)
        if parts.scheme or parts.netloc:
            return None
        return quote(value, safe=_SAFE_CHARS)

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return None
    key = _origin_key(parts.scheme, parts.netloc)
    if key is None or key != _origin_key(*_split_origin(site)):
        return None
    rest = parts.path or "/"
    if not rest.startswith("/") or rest.startswith("//"):
        return None
    if parts.query:
        rest += "?" + parts.query
    if parts.fragment:
        rest += "#" + parts.fragment
    return quote(rest, safe=_SAFE_CHARS)


def _split_origin(site: str) -> tuple[str, str]:
    parts = urlsplit(site)
    return parts.scheme, parts.netloc


def _origin_key(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    try:
        parsed = urlsplit(f"{scheme}://{netloc}")
        port = parsed.port or _DEFAULT_PORTS[scheme]
    except (ValueError, KeyError):
        return None
    host = (parsed.hostname or "").rstrip(".")
    if not host or not host.isascii():
        return None
    return scheme, host, port
