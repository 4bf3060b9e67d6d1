"""Gunicorn settings for production: ``gunicorn -c gunicorn.conf.py app:app``.

Sizing (README, "Production serving and benchmarks"): one worker process per core, since
each process runs Python on one core at a time (the GIL); a few threads per worker, so a
worker keeps its core busy while a request waits on PostgreSQL and serves keep-alive
connections (``gthread``; the ``sync`` worker closes the connection after every response).
Each thread needs at most one pooled database connection, so ``DB_POOL_SIZE`` should equal
``threads``; workers x (DB_POOL_SIZE + DB_MAX_OVERFLOW) must stay below PostgreSQL's
``max_connections``. Every setting here can be overridden on the command line or through
``GUNICORN_CMD_ARGS`` (e.g. ``--workers 4 --threads 8``); ``WEB_CONCURRENCY`` sets the
worker count, as gunicorn itself honours it.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType
from typing import Any

from gunicorn import glogging

# The app without Flask-Migrate (create_app(migrations=False)): workers never migrate.
wsgi_app = "webapp:create_app(migrations=False)"
bind = ["127.0.0.1:8000"]
workers = int(os.environ.get("WEB_CONCURRENCY") or os.cpu_count() or 1)
worker_class = "gthread"
threads = 4
# Requests here are short; a worker silent for 30 s is stuck and gets replaced.
timeout = 30
graceful_timeout = 20
# Longer than a proxy's idle timeout toward us would be pointless; loopback clients and
# proxies reuse the connection for the next request.
keepalive = 5
# Bounded request sizes, as the app's MAX_CONTENT_LENGTH is.
limit_request_line = 8190
limit_request_fields = 100
# Access log on stdout, one line per request: client, request line, status, bytes,
# duration in milliseconds, and the request id the app echoes (it appears in its logs too).
# The request line's secret query values (the e-mail link's token, OAuth codes) are
# redacted and every client-sent value is encoded (webapp/logsafe.py): docs/security.md, "Logs".
ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms rid=%({x-request-id}o)s "%(a)s"'
accesslog = "-"
access_log_format = ACCESS_LOG_FORMAT


@functools.cache
def _logsafe() -> ModuleType:
    """Return webapp.logsafe, imported on first use.

    Not at the top of this file: importing ``webapp`` loads Flask and SQLAlchemy, which the
    master (it reads this file and serves no request) does not need. A worker has imported
    it already, with the app.
    """
    from webapp import logsafe

    return logsafe


class AccessLogger(glogging.Logger):
    """gunicorn's logger, building only the fields ACCESS_LOG_FORMAT uses, and safely.

    gunicorn's own ``atoms`` builds some forty per request (a timestamp, every header and
    every environ variable): 9% of a worker's instructions on a signed-out ``GET
    /auth/session`` (callgrind). A different format given on the command line (or in
    GUNICORN_CMD_ARGS) gets gunicorn's full set, made safe by ``_safe_atoms``. gunicorn only
    escapes double quotes; it refuses controls in the request target and headers but lets
    bytes 0x80-0xFF through (0x85 is a line break to ``str.splitlines``), hence the encoding.
    """

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        if self.cfg.access_log_format != ACCESS_LOG_FORMAT:
            return _safe_atoms(super().atoms(resp, req, environ, request_time))
        logsafe = _logsafe()
        uri = environ["RAW_URI"]
        if "?" in uri:  # one scan; most requests have no query and skip the parser
            uri = logsafe.redact(uri)
        request_line = f"{environ['REQUEST_METHOD']} {uri} {environ['SERVER_PROTOCOL']}"
        request_id = next((v for k, v in resp.headers if k.lower() == "x-request-id"), "-")
        return {
            "h": environ.get("REMOTE_ADDR", "-"),
            # encode() returns printable text without a backslash as it is, after one scan.
            "r": logsafe.encode(request_line, limit=None),
            "s": str(resp.status).split(None, 1)[0],
            "b": str(resp.sent) if getattr(resp, "sent", None) is not None else "-",
            "M": request_time.seconds * 1000 + request_time.microseconds // 1000,
            "{x-request-id}o": request_id,
            "a": logsafe.encode(environ.get("HTTP_USER_AGENT", "-"), limit=None),
        }

    # gunicorn reports a malformed request with its raw request line or header ("Invalid
    # request from ip=…: …"), and a crash with the request's URI: the same rules apply.
    def warning(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        super().warning(*_safe_message(msg, args), **kwargs)

    def exception(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        super().exception(*_safe_message(msg, args), **kwargs)


# Atoms of gunicorn's full set that hold a URL, a query string or a credential.
_URL_ATOMS = frozenset({"r", "f", "{referer}i", "{raw_uri}e", "{http_referer}e"})
_QUERY_ATOMS = frozenset({"q", "{query_string}e"})


@functools.cache
def _secret_header_atoms() -> frozenset[str]:
    names = _logsafe().SECRET_HEADERS
    return frozenset({f"{{{h}}}i" for h in names}) | {
        f"{{http_{h.replace('-', '_')}}}e" for h in names
    }


def _safe_atoms(atoms: dict[str, Any]) -> dict[str, Any]:
    """Redact the secrets in gunicorn's own atoms and encode every text among them."""
    logsafe = _logsafe()
    secret_headers = _secret_header_atoms()
    for key, value in atoms.items():
        if not isinstance(value, str):
            continue
        if key in _URL_ATOMS:
            value = logsafe.redact(value)
        elif key in _QUERY_ATOMS:
            value = logsafe.redact_query(value)
        elif key in secret_headers:
            value = logsafe.REDACTED
        atoms[key] = logsafe.encode(value, limit=None)
    return atoms


def _safe_message(msg: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return the arguments for the error log's call: one redacted, encoded message."""
    # Only a worker has loaded the app (and logsafe with it); the master's messages carry
    # no request data, and importing the app there would only cost memory.
    logsafe = sys.modules.get("webapp.logsafe")
    if logsafe is None:
        return (msg, *args)
    text = str(msg % args if args else msg)
    return (logsafe.encode(logsafe.redact(text), limit=None),)


logger_class = AccessLogger
errorlog = "-"
loglevel = "info"
# gunicorn itself believes no forwarded header: which proxies are trusted for the client's
# address and scheme is the app's AUTH_TRUSTED_PROXIES, decided in one place
# (webapp/proxies.py). gunicorn's default would take X-Forwarded-Proto from loopback.
forwarded_allow_ips = ""
