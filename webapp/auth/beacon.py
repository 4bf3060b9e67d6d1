"""The client log beacon (``POST _log``): accept small reports and log them safely.

Browsers report errors here. The body is untrusted: it is size-capped before parsing,
each field is truncated and stripped of control characters (no forged log lines), the
level is mapped to one of ours, and reports are rate limited per IP.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from flask import Request

from . import ratelimit, urls

client_log = logging.getLogger("webapp.client")

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR}
FIELD_MAX = 500
MAX_FIELDS = 20
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def accept(request: Request) -> str | None:
    """Log one beacon; return None, or an error code for a 400/429 answer."""
    conf = urls.settings()
    length = request.content_length
    if length is None or length > conf.log_beacon_max_bytes:
        return "PayloadTooLarge" if length else "EmptyBody"
    fields = _parse(request)
    if fields is None:
        return "MalformedBody"
    if ratelimit.hit(f"log-ip:{request.remote_addr}", conf.log_beacon_limit) > (
        conf.log_beacon_limit.limit
    ):
        return "RateLimited"
    level = LEVELS.get(str(fields.pop("level", "error")).lower(), logging.ERROR)
    clean = {
        _clean(str(k))[:64]: _clean(v if isinstance(v, str) else json.dumps(v))[:FIELD_MAX]
        for k, v in list(fields.items())[:MAX_FIELDS]
    }
    code = clean.pop("code", "-")
    client_log.log(level, "client report code=%s fields=%s", code, json.dumps(clean))
    return None


def _parse(request: Request) -> dict[str, Any] | None:
    if request.mimetype == "application/json":
        try:
            data = json.loads(request.get_data(cache=False))
        except (ValueError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return dict(request.form.items()) or None
    return None


def _clean(text: str) -> str:
    return _UNPRINTABLE.sub(" ", text)
