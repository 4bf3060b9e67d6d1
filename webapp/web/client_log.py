"""The client log beacon (``POST _log``): accept small reports and log them safely.

Browsers report errors here. The body is untrusted: it is size-capped before parsing,
each key and value is truncated and encoded by ``logsafe`` (no forged log lines), the level
is mapped to one of ours, and reports are rate limited per IP. The line reads
``client report code="…" message="…" …``: every value quoted, so none can pose as a field.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

from webapp.audit import throttles
from webapp.core import jsonsafe
from webapp.settings import current_settings
from webapp.telemetry import logsafe

client_log = logging.getLogger("webapp.client")

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FIELD_MAX = 500
MAX_FIELDS = 20
KEY_MAX = 64
# A key shown bare; any other key is quoted and encoded like a value.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def accept(request: Request) -> str | None:
    """Log one beacon; return None, or an error code for a 400/429 answer. A body over the
    beacon's limit is refused unread with 413, as one over the app's limit is."""
    conf = current_settings()
    length = request.content_length
    if length is None:
        return "EmptyBody"
    if length > conf.log_beacon_max_bytes:
        raise RequestEntityTooLarge()
    fields = _parse(request)
    if fields is None:
        return "MalformedBody"
    key = f"log-ip:{throttles.client_network(request.remote_addr)}"
    if throttles.admit([(key, conf.log_beacon_limit)]) is None:
        return "RateLimited"
    level = LEVELS.get(str(fields.pop("level", "error")).lower(), logging.ERROR)
    pairs = [f"code={_value(fields.pop('code', '-'))}"]
    pairs += [f"{_key(str(k))}={_value(v)}" for k, v in list(fields.items())[:MAX_FIELDS]]
    client_log.log(level, "client report %s", " ".join(pairs))
    return None


def _parse(request: Request) -> dict[str, Any] | None:
    if request.mimetype == "application/json":
        try:
            data = jsonsafe.loads(request.get_data(cache=False))
        except (ValueError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return dict(request.form.items()) or None
    return None


def _key(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return key
    return logsafe.encode(key, limit=KEY_MAX, quote=True)


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # A report may quote a page's URL, and the link page's URL carries the token.
    return logsafe.encode(logsafe.redact(text), limit=FIELD_MAX, quote=True)
