"""Which host names this site answers to: a request naming another is refused with 400.

The check runs before anything else a request can cause (a form, a cookie, a row, an
e-mail), on the host the request names: its ``Host`` header, or the ``X-Forwarded-Host``
of a trusted proxy (``webapp.core.proxies``). Accepted: AUTH_URL's host name and those listed in
AUTH_ALLOWED_HOSTS. Ports are not compared, so a health check or an operator reaching one
instance directly on its own port still works. The check is a second line: no URL is ever
built from the request's host anyway.

In development the other loopback names (``127.0.0.1``, ``::1``, ``localhost``) are sent to
AUTH_URL's host with a 307 that keeps the method, path and query, before any page or
cookie: cookies belong to one host name, so a form shown at one name and posted to the
other would fail its CSRF check. The target is built from AUTH_URL, never from the request.
(Without AUTH_URL under a server whose port is unknown, they are served where they are
named: ``Settings.auth_url_from_request``.)
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlsplit

from flask import Flask, jsonify, make_response, render_template, request
from werkzeug.utils import redirect

from webapp.core.proxies import FORWARDED_HOST
from webapp.settings import LOOPBACK_HOSTS, Settings
from webapp.telemetry.logsafe import encode

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
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. "http://[x": not a URL, so not this site
        return False
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


Verdict = Literal["ours", "elsewhere", "foreign"]


class HostCheck:
    """WSGI middleware answering 400 to a request for a host that is not ours.

    A WSGI layer rather than a request hook: it runs on every request, before Flask builds
    anything, and a host seen before costs one dictionary look-up (the verdicts of up to
    ``CACHE_SIZE`` distinct Host values are kept). Only a refusal enters the app, to render
    the page. In development a loopback name other than AUTH_URL's is ``elsewhere``: sent
    to AUTH_URL's host (module docstring).
    """

    CACHE_SIZE = 256

    def __init__(self, app: Flask, conf: Settings, expects_json: Callable[[], bool]) -> None:
        self.app = app
        self.wsgi_app = app.wsgi_app
        self.accepted = accepted_hosts(conf)
        self.expected = urlsplit(conf.auth_url).hostname or ""
        self.expects_json = expects_json
        # Development sends the loopback names to AUTH_URL's host, except where AUTH_URL is
        # not known (links then follow the request, webapp.core.urls) and those listed in
        # AUTH_ALLOWED_HOSTS.
        self.redirected: frozenset[str] = frozenset()
        if conf.is_development and not conf.auth_url_from_request:
            loopback = {h.strip("[]") for h in LOOPBACK_HOSTS}
            self.redirected = frozenset(loopback - {self.expected, *conf.allowed_hosts})
        self.origin = conf.origin
        self.verdicts: dict[str, Verdict] = {}

    def verdict(self, named: str) -> Verdict:
        """Whether a request naming ``named`` (a ``Host`` value) is served, redirected to
        AUTH_URL's host or refused."""
        name = hostname(named)
        if name in self.redirected:
            return "elsewhere"
        return "ours" if name in self.accepted else "foreign"

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        named = named_host(environ)
        verdict = self.verdicts.get(named)
        if verdict is None:
            verdict = self.verdict(named)
            if len(self.verdicts) < self.CACHE_SIZE:
                self.verdicts[named] = verdict
        if verdict == "ours":
            return self.wsgi_app(environ, start_response)
        if verdict == "elsewhere":
            return self._send_to_auth_url_host(environ, start_response)
        return self._refuse(named, environ, start_response)

    def _send_to_auth_url_host(
        self, environ: WSGIEnvironment, start_response: StartResponse
    ) -> Iterable[bytes]:
        """The same method, path and query at AUTH_URL's scheme, host and port.

        307 rather than 302: a POST stays a POST (it then fails its CSRF check there, with
        the usual message, rather than turning into a GET of a form action). Never
        permanent: the browser would remember it after AUTH_URL changes.
        """
        # WSGI gives the path percent-decoded (as latin-1 text of its bytes) and the query as
        # sent; both are quoted again only where they hold what a URL may not.
        path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1")
        query = environ.get("QUERY_STRING", "").encode("latin-1")
        location = self.origin + quote(path, safe="/!$&'()*+,:;=@%")
        if query:
            location += "?" + quote(query, safe="!$&'()*+,/:;=?@%")
        response = redirect(location, 307)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response(environ, start_response)

    def _refuse(
        self, named: str, environ: WSGIEnvironment, start_response: StartResponse
    ) -> Iterable[bytes]:
        log.warning(
            "refused request for foreign host %s (this site is %s)",
            encode(named),
            self.expected,
        )
        # The page is rendered as if the request had named AUTH_URL's host: a host Werkzeug
        # cannot even parse (a label over 63 characters) would leave the page no URL adapter.
        own = {**environ, "HTTP_HOST": urlsplit(self.origin).netloc}
        own.pop(FORWARDED_HOST, None)
        with self.app.request_context(own):
            # The expected host is AUTH_URL's; nothing of the request's host is shown.
            if self.expects_json():
                body = jsonify({"error": "UnknownHost", "expectedHost": self.expected})
            else:
                body = make_response(render_template("host_refused.html", expected=self.expected))
            # No app hook ran: the page (no script, the host name escaped) says no-store itself.
            body.status_code = 400
            body.headers["Cache-Control"] = "no-store"
            body.headers["X-Content-Type-Options"] = "nosniff"
            return body(environ, start_response)


def wrap(app: Flask, conf: Settings, expects_json: Callable[[], bool]) -> HostCheck:
    """Return ``app``'s WSGI callable behind the host check (install it before the proxies'
    middleware, which must run first to name the forwarded host). ``expects_json`` tells,
    in the refused request's context, whether its caller wants JSON (as every error answer
    decides it, ``webapp.web.error_answers.expects_json``)."""
    return HostCheck(app, conf, expects_json)
