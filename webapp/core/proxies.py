"""Trusted reverse proxies: the client's real address and scheme, from their forwarded headers.

A proxy in front of the app connects to it itself, so ``REMOTE_ADDR`` is the proxy and the
client's address travels in ``X-Forwarded-For``, which anyone can also send. We believe
the header only as far as it was written by proxies we trust (``AUTH_TRUSTED_PROXIES``):
read from the right, each trusted hop vouches for the entry to its left, and the first
entry not vouched for is the client. A client that adds its own entries only adds them on
the left, where nobody reads them, so it cannot pick the address the throttles count.

What we take from trusted proxies: the client's address (``REMOTE_ADDR``, which throttles,
sessions and logs read) and whether the original request was https (``wsgi.url_scheme``).
The forwarded host is recorded for the host check only (``webapp.core.hosts``); no URL is ever
built from it: absolute URLs come from AUTH_URL. The RFC 7239 ``Forwarded`` header is not
read; a proxy in front of this app must send ``X-Forwarded-*`` (docs/how-to/deploy.md,
"Behind a proxy").
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import TYPE_CHECKING, Any

from webapp.settings import TrustedProxies

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: The peer's own address, kept before REMOTE_ADDR is replaced (for diagnostics).
PEER_ADDR = "webapp.peer_addr"
#: The host name a trusted proxy forwarded (X-Forwarded-Host), for the host check only.
FORWARDED_HOST = "webapp.forwarded_host"


def _parse_ip(text: str) -> IPv4Address | IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [2001:db8::1]:443
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # 203.0.113.9:443
        text = text.split(":", 1)[0]
    try:
        return ip_address(text)
    except ValueError:
        return None


def _values(environ: WSGIEnvironment, key: str) -> list[str]:
    # WSGI servers join repeated headers with commas; so do proxies that append.
    raw = environ.get(key)
    return [v.strip() for v in raw.split(",")] if raw else []


class ForwardedHeaders:
    """WSGI middleware applying the forwarded headers of trusted proxies (and only theirs)."""

    def __init__(self, app: WSGIApplication, trusted: TrustedProxies) -> None:
        self.app = app
        self.trusted = trusted

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        peer = environ.get("REMOTE_ADDR", "")
        environ[PEER_ADDR] = peer
        client, hops = self._client(peer, _values(environ, "HTTP_X_FORWARDED_FOR"))
        if hops:
            environ["REMOTE_ADDR"] = client
            proto = _hop_value(_values(environ, "HTTP_X_FORWARDED_PROTO"), hops).lower()
            if proto in ("http", "https"):
                environ["wsgi.url_scheme"] = proto
            host = _hop_value(_values(environ, "HTTP_X_FORWARDED_HOST"), hops)
            if host:
                environ[FORWARDED_HOST] = host
        return self.app(environ, start_response)

    def _client(self, peer: str, forwarded_for: list[str]) -> tuple[str, int]:
        """Return the client's address and how many trusted hops stand between us and it."""
        if self.trusted.hops:
            # Every request comes through exactly this many proxies; a shorter chain means
            # this one did not, so nothing in it is believed.
            if len(forwarded_for) < self.trusted.hops:
                return peer, 0
            address = _parse_ip(forwarded_for[-self.trusted.hops])
            return (str(address), self.trusted.hops) if address else (peer, 0)
        if not self._is_trusted(_parse_ip(peer)):
            return peer, 0
        client, hops = peer, 1
        for entry in reversed(forwarded_for):
            address = _parse_ip(entry)
            if address is None:
                break  # trusted proxies write addresses: this entry is not one of theirs
            client = str(address)
            if not self._is_trusted(address):
                break
            hops += 1
        return client, hops

    def _is_trusted(self, address: IPv4Address | IPv6Address | None) -> bool:
        return address is not None and any(address in net for net in self.trusted.networks)


def _hop_value(values: list[str], hops: int) -> str:
    """The value the outermost trusted proxy wrote: ``hops`` from the right, or the first."""
    if not values:
        return ""
    return values[max(len(values) - hops, 0)]


def wrap(app: Any, trusted: TrustedProxies) -> Any:
    """Return ``app`` behind the middleware, or unchanged when no proxy is trusted."""
    return ForwardedHeaders(app, trusted) if trusted else app
