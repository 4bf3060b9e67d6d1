"""Request ids and logging: every log line about a request and every error page carries the
request's id.

The id is given to a request by the outermost WSGI layer (``wrap``), before the host check
or the app run, and stays current until its answer is closed: the development server
writes its request line (``"GET /auth/session HTTP/1.1" 200 -``) while sending the answer,
after the app's request context has gone, and that line carries the id too. Lines that
are about no request (start-up) show ``-``.

Lines are text, or with AUTH_LOG_FORMAT=json one JSON object each (``jsonlines``), the
access line's values then also keys of their own.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from flask import Flask, has_request_context, request
from werkzeug.wsgi import ClosingIterator

from webapp.telemetry import logsafe
from webapp.telemetry.jsonlines import FIELDS, JsonLines

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from webapp.settings import Settings

REQUEST_ID_HEADER = "X-Request-ID"
#: The WSGI environ key holding the request's id (set by ``RequestIds``).
REQUEST_ID_ENVIRON = "webapp.request_id"
_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
#: The lines ``init_app``'s handler writes in the text format.
TEXT_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"
#: The id of the request this thread is answering, from the WSGI layer to the answer's end.
_answering: ContextVar[str | None] = ContextVar("webapp_answering", default=None)


def new_request_id(incoming: str | None) -> str:
    """A proxy's id when it looks like one (logs can then be joined across hops), else a
    fresh one."""
    return incoming if incoming and _VALID_ID.match(incoming) else uuid.uuid4().hex


def environ_request_id(environ: WSGIEnvironment) -> str:
    """The id ``RequestIds`` gave this request (a fresh one if it did not run)."""
    rid = environ.get(REQUEST_ID_ENVIRON)
    if not isinstance(rid, str):
        rid = environ[REQUEST_ID_ENVIRON] = new_request_id(environ.get("HTTP_X_REQUEST_ID"))
    return rid


def current_request_id() -> str:
    """The id of the request being answered ("-" outside any)."""
    if has_request_context():
        return environ_request_id(request.environ)
    return _answering.get() or "-"


#: One line per answered request, written by ``RequestIds`` when this logger is enabled at
#: INFO (the production server's config does it, deploy/serve.py, and ``init_app`` in JSON
#: when no server did; else the development server writes its own lines; health checks at
#: DEBUG): client, request line (secrets redacted), status, bytes, duration, request id and
#: user agent, every client-sent value encoded (``logsafe``):
#: ``127.0.0.1 "GET /auth/session HTTP/1.1" 200 5 3ms rid=… "curl/8.5"``.
access_log = logging.getLogger("webapp.access")
if access_log.level == logging.NOTSET:
    # Off, unless a server's logging config (applied before the app loads) set a level.
    access_log.setLevel(logging.WARNING)


class RequestIds:
    """WSGI middleware (the outermost layer): gives each request its id, sends it back in
    ``X-Request-ID`` on every answer (the app's and the host check's), keeps it current,
    for log lines written outside the app's request context, until the server closes the
    answer, and then writes the access log line."""

    def __init__(self, app: WSGIApplication, quiet_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        #: Paths logged at DEBUG only: the health checks a balancer makes every second.
        self.quiet_paths = quiet_paths

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        began = time.perf_counter()
        rid = environ_request_id(environ)
        _answering.set(rid)
        answer: list[Any] = []

        def start_with_id(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            headers.append((REQUEST_ID_HEADER, rid))
            answer[:] = status, headers
            return start_response(status, headers, exc_info)

        # If the app raises, the id stays current for the server's error lines, until the
        # next request of this thread. (So it does after an answer nobody closes, as the
        # Flask test client leaves them; servers close every answer.)
        body = self.app(environ, start_with_id)

        def log_answer() -> None:
            level = logging.DEBUG if environ.get("PATH_INFO") in self.quiet_paths else logging.INFO
            if answer and access_log.isEnabledFor(level):
                took = time.perf_counter() - began
                _log_access(environ, answer[0], answer[1], rid, took, level)

        if isinstance(body, list):
            # A body held in memory (``webapp.WholeBodyResponse``): the answer is complete,
            # so its line is written now, and it goes back as a list, which the server sends
            # in one piece.
            log_answer()
            return _WholeAnswer(body)

        def answered() -> None:
            log_answer()
            _answering.set(None)

        file_wrapper = environ.get("wsgi.file_wrapper")
        if isinstance(file_wrapper, type) and isinstance(body, file_wrapper):
            # The server sends this file itself (sendfile): hand it over unwrapped.
            answered()
            return body
        return ClosingIterator(body, answered)


class _WholeAnswer(list[bytes]):
    """A body held in memory, still a list (granian hands a list's bytes to its Rust side
    in one call, where it would read any other body item by item, taking the GIL for each),
    whose ``close()`` ends the id's time as the current one. A server that writes its own
    line while sending (the development server) closes the answer after it; granian, which
    writes none, does not close a list, and the id then stays until the thread's next
    request."""

    def close(self) -> None:
        _answering.set(None)


def _log_access(
    environ: WSGIEnvironment,
    status: str,
    headers: list[tuple[str, str]],
    rid: str,
    took: float,
    level: int,
) -> None:
    # WSGI gives the path as the latin-1 text of its bytes: shown as the UTF-8 it was sent in.
    target = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
    query = environ.get("QUERY_STRING")
    if query:
        target += "?" + logsafe.redact_query(query)
    method, protocol = environ.get("REQUEST_METHOD"), environ.get("SERVER_PROTOCOL")
    size = next((v for k, v in headers if k.lower() == "content-length"), "-")
    # encode() returns printable text without a backslash as it is, after one scan.
    shown_line = logsafe.encode(f"{method} {target} {protocol}", limit=None, quote=True)
    user_agent = environ.get("HTTP_USER_AGENT", "-")
    agent = logsafe.encode(user_agent, limit=None, quote=True)
    client, code = environ.get("REMOTE_ADDR", "-"), status.split(None, 1)[0]
    line = f"{client} {shown_line} {code} {size} {int(took * 1000)}ms rid={rid} {agent}"
    if _wrote_plainly(line, level):
        return
    # The same values as keys of their own, encoded as in the line, for a JSON reader to
    # filter on (``jsonlines``); text formatters show the line alone.
    fields = {
        "client": client,
        "method": logsafe.encode(method, limit=None),
        "path": logsafe.encode(target, limit=None),
        "protocol": logsafe.encode(protocol, limit=None),
        "status": int(code) if code.isdigit() else code,
        "bytes": int(size) if size.isdigit() else None,
        "duration_ms": round(took * 1000, 1),
        "user_agent": logsafe.encode(user_agent, limit=None),
    }
    access_log.log(level, "%s", line, extra={FIELDS: fields})


def _wrote_plainly(line: str, level: int) -> bool:
    """Write ``line`` straight to the access log's stream when logging would write exactly
    that: its one handler a ``StreamHandler`` whose formatter shows the message alone, no
    filter, nothing propagated (the production server's config, deploy/serve.py).

    A record made, passed through the logger and formatted, only to print its message, took
    about 38,000 of a line's 64,000 instructions (callgrind), 4% of a session read; any
    other config (a formatter with more fields, a filter, another handler) gets records.
    """
    handlers = access_log.handlers
    if len(handlers) != 1 or access_log.filters or access_log.propagate:
        return False
    handler = handlers[0]
    formatter = handler.formatter
    if (
        type(handler) is not logging.StreamHandler
        or handler.filters
        or level < handler.level
        or type(formatter) is not logging.Formatter
        or formatter._fmt != "%(message)s"
    ):
        return False
    try:
        with handler.lock:  # type: ignore[union-attr]
            handler.stream.write(line + handler.terminator)
            handler.stream.flush()
    except Exception:
        return False  # the logger reports it, as for any line it fails to write
    return True


def wrap(app: WSGIApplication, quiet_paths: frozenset[str] = frozenset()) -> RequestIds:
    """Return ``app`` behind the request id layer (install it outermost); requests for
    ``quiet_paths`` are written to the access log at DEBUG."""
    return RequestIds(app, quiet_paths)


def _install_record_factory() -> None:
    """Give every log record a ``request_id`` attribute ("-" outside a request).

    A record factory rather than a handler filter, so that handlers added later (a WSGI
    server's, pytest's) see the attribute too.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "adds_request_id", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.request_id = current_request_id()
        return record

    factory.adds_request_id = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class _DevServerRedaction(logging.Filter):
    """Redact secrets in the development server's request lines (the ``werkzeug`` logger).

    werkzeug logs ``"GET /auth/callback/email?token=… HTTP/1.1" 200 -`` with the request
    line as the first argument of the record. It escapes C0, C1 and the backslash in it
    but not U+2028 and U+2029, which this escapes; its colours stay.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                logsafe.escape_separators(logsafe.redact(a)) if isinstance(a, str) else a
                for a in record.args
            )
        return True


class _MigrationStepsOnly(logging.Filter):
    """Alembic's INFO lines, but one per applied migration.

    Alembic announces its plugins (``setup plugin alembic.autogenerate.schemas``, seven of
    them) and its database dialect (``Context impl SQLiteImpl.``, ``Will assume
    non-transactional DDL.``) on every run: this drops those INFO lines and keeps
    ``Running upgrade a -> b, <title>`` on one line (a migration's title may span several).
    Warnings and errors pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        if record.name != "alembic.runtime.migration" or record.msg != "Running %s":
            return False
        record.msg, record.args = " ".join(record.getMessage().split()), ()
        return True


def _install_filter(logger_name: str, kind: type[logging.Filter]) -> None:
    """Put a ``kind`` filter on a logger, once per process.

    On the logger rather than a handler: libraries (werkzeug) add their own handler when
    they find none, and any handler (a WSGI server's, pytest's) then sees the result.
    """
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, kind) for f in logger.filters):
        logger.addFilter(kind())


class _RequestLinesGiveWay(logging.Filter):
    """Drop the development server's request line about a request this layer answered while
    the access line is on: that line says the same, with the duration, and in JSON with
    each value as a key. werkzeug's line for a request refused before the app stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            _answering.get() is not None
            and access_log.isEnabledFor(logging.INFO)
            and isinstance(record.msg, str)
            and record.msg.endswith('"%s" %s %s')  # werkzeug's log_request
        )


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of the lines we write: ``text`` or ``json`` (AUTH_LOG_FORMAT)."""
    return JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def init_app(app: Flask, conf: Settings) -> None:
    """Configure logging if nobody has: the request id on every line, in the format
    AUTH_LOG_FORMAT names.

    In JSON, when no server took the access log (the development server, which writes its
    own request lines, or any server without a logging config), it is turned on: every
    request then has its line with the status as a number, in place of werkzeug's.
    """
    _install_record_factory()
    _install_filter("werkzeug", _DevServerRedaction)
    for name in ("alembic.runtime.plugins", "alembic.runtime.migration"):
        _install_filter(name, _MigrationStepsOnly)
    root = logging.getLogger()
    if root.handlers:
        return  # the application's, or its server's: left as they are
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(conf.log_format))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    if conf.log_format == "json" and not access_log.handlers:
        access_log.setLevel(logging.INFO)
        _install_filter("werkzeug", _RequestLinesGiveWay)
