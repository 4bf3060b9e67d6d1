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

import os
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
ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms rid=%({x-request-id}o)s "%(a)s"'
accesslog = "-"
access_log_format = ACCESS_LOG_FORMAT


class AccessLogger(glogging.Logger):
    """gunicorn's logger, building only the fields ACCESS_LOG_FORMAT uses.

    gunicorn's own ``atoms`` builds some forty per request (a timestamp, every header and
    every environ variable): 9% of a worker's instructions on a signed-out ``GET
    /auth/session`` (callgrind). A different format given on the command line (or in
    GUNICORN_CMD_ARGS) gets gunicorn's full set.
    """

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        if self.cfg.access_log_format != ACCESS_LOG_FORMAT:
            return super().atoms(resp, req, environ, request_time)
        request_id = next((v for k, v in resp.headers if k.lower() == "x-request-id"), "-")
        return {
            "h": environ.get("REMOTE_ADDR", "-"),
            "r": f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}",
            "s": str(resp.status).split(None, 1)[0],
            "b": str(resp.sent) if getattr(resp, "sent", None) is not None else "-",
            "M": request_time.seconds * 1000 + request_time.microseconds // 1000,
            "{x-request-id}o": request_id,
            "a": environ.get("HTTP_USER_AGENT", "-"),
        }


logger_class = AccessLogger
errorlog = "-"
loglevel = "info"
# Behind a reverse proxy on the same host, trust its X-Forwarded-* only from loopback
# (the app also needs AUTH_TRUST_HOST=true to use them).
forwarded_allow_ips = "127.0.0.1,::1"
