"""Request ids and logging: every log line and error page carries the request's id."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from flask import Flask, Response, g, has_request_context, request

from webapp import logsafe

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def _current_request_id() -> str:
    return str(g.get("request_id", "-")) if has_request_context() else "-"


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
        record.request_id = _current_request_id()
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


def _install_dev_server_redaction() -> None:
    """Put the redaction on the ``werkzeug`` logger, once per process.

    On the logger rather than a handler: werkzeug adds its own handler when it finds
    none, and any handler (a WSGI server's, pytest's) then sees the redacted record.
    """
    logger = logging.getLogger("werkzeug")
    if not any(isinstance(f, _DevServerRedaction) for f in logger.filters):
        logger.addFilter(_DevServerRedaction())


def init_app(app: Flask) -> None:
    """Assign request ids, echo them in a header, and configure logging if nobody has."""

    @app.before_request
    def _assign_request_id() -> None:
        # Accept a proxy's id when it looks like one, so logs can be joined across hops.
        incoming = request.headers.get(REQUEST_ID_HEADER, "")
        g.request_id = incoming if _VALID_ID.match(incoming) else uuid.uuid4().hex

    @app.after_request
    def _echo_request_id(response: Response) -> Response:
        if "request_id" in g:
            response.headers[REQUEST_ID_HEADER] = g.request_id
        return response

    _install_record_factory()
    _install_dev_server_redaction()
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s")
        )
        root.addHandler(handler)
        root.setLevel(logging.INFO)
