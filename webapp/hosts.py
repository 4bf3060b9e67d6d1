"""Which host names this site answers to: a request naming another is refused with 400.

The check runs before anything else a request can cause (a form, a cookie, a row, an
e-mail), on the host the request names: its ``Host`` header, or the ``X-Forwarded-Host``
of a trusted proxy (``webapp.proxies``). Accepted: AUTH_URL's host name, those listed in
AUTH_ALLOWED_HOSTS and, in development, the loopback names. Ports are not compared, so a
health check or an operator reaching one instance directly on its own port still works.
The check is a second line: no URL is ever built from the request's host anyway.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flask import Flask, jsonify, make_response, render_template, request

from webapp.logsafe import encode
from webapp.proxies import FORWARDED_HOST
from webapp.settings import LOOPBACK_HOSTS, Settings

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)


#: A well-formed Host value: a DNS name or IPv4 address, or a bracketed IPv6 address,
#: with an optional port. Anything else (user info, paths, spaces) names no host of ours.
_HOST_VALUE = re.compile(r"^(?:([a-z0-9._-]+)|\[([0-9a-f:.]+)\])(?::[0-9]{1,5})?$")


def hostname(value: str) -> str:
    """Return the host name of a ``Host``-style value (lower case, no port, no final dot).

    A malformed value gives ``""``, which no setting accepts.
    """
    match = _HOST_VALUE.fullmatch(value.strip().lower())
    if match is None:
        return ""
    return (match[1] or match[2]).rstrip(".")


def accepted_hosts(conf: Settings) -> frozenset[str]:
    """Return the host names requests may name under these settings."""
    return _accepted(conf.auth_url, conf.allowed_hosts, conf.is_development)


@functools.cache
def _accepted(auth_url: str, allowed: tuple[str, ...], development: bool) -> frozenset[str]:
    # Cached: the CSRF origin check asks on every POST; the answer is fixed at start-up.
    hosts = {urlsplit(auth_url).hostname or "", *allowed}
    if development:
        hosts |= {h.strip("[]") for h in LOOPBACK_HOSTS}
    return frozenset(hosts - {""})


def is_own_origin(value: str, conf: Settings) -> bool:
    """Whether an ``Origin`` or ``Referer`` value is this site: AUTH_URL's scheme, an
    accepted host name (ports are not compared, as in the host check)."""
    parts = urlsplit(value)
    if parts.scheme != urlsplit(conf.auth_url).scheme and not (
        conf.is_development and parts.scheme == "http"
    ):
        return False
    return hostname(parts.netloc) in accepted_hosts(conf)


def named_host(environ: WSGIEnvironment) -> str:
    """Return the host (with port) a request names: a trusted proxy's, else ``Host``."""
    return str(environ.get(FORWARDED_HOST) or environ.get("HTTP_HOST") or "")


def request_host() -> str:
    """``named_host`` of the current request."""
    return named_host(request.environ)


class HostCheck:
    """WSGI middleware answering 400 to a request for a host that is not ours.

    A WSGI layer rather than a request hook: it runs on every request, before Flask builds
    anything, and a host seen before costs one dictionary look-up (the verdicts of up to
    ``CACHE_SIZE`` distinct Host values are kept). Only a refusal enters the app, to render
    the page.
    """

    CACHE_SIZE = 256

    def __init__(self, app: Flask, conf: Settings) -> None:
        self.app = app
        self.wsgi_app = app.wsgi_app
        self.accepted = accepted_hosts(conf)
        self.expected = urlsplit(conf.auth_url).hostname or ""
        self.json_paths = {f"{conf.base_path}/{name}" for name in ("session", "csrf", "providers")}
        self.verdicts: dict[str, bool] = {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        named = named_host(environ)
        ours = self.verdicts.get(named)
        if ours is None:
            ours = hostname(named) in self.accepted
            if len(self.verdicts) < self.CACHE_SIZE:
                self.verdicts[named] = ours
        if ours:
            return self.wsgi_app(environ, start_response)
        return self._refuse(named, environ, start_response)

    def _refuse(
        self, named: str, environ: WSGIEnvironment, start_response: StartResponse
    ) -> Iterable[bytes]:
        log.warning("refused request for foreign host %s", encode(named))
        with self.app.request_context(environ):
            if request.accept_mimetypes.best == "application/json" or (
                request.path in self.json_paths
            ):
                body = jsonify({"error": "UnknownHost", "expectedHost": self.expected})
            else:
                body = make_response(render_template("host_refused.html", expected=self.expected))
            # No app hook ran: the page (no script, the host name escaped) says no-store itself.
            body.status_code = 400
            body.headers["Cache-Control"] = "no-store"
            body.headers["X-Content-Type-Options"] = "nosniff"
            return body(environ, start_response)


def wrap(app: Flask, conf: Settings) -> HostCheck:
    """Return ``app``'s WSGI callable behind the host check (install it before the proxies'
    middleware, which must run first to name the forwarded host)."""
    return HostCheck(app, conf)
