"""Log lines as JSON, one object per line, for a machine to read (AUTH_LOG_FORMAT=json).

A line holds what the text format shows, and no more: the message is the same text, its
client-sent values encoded and its secrets redacted where it was made (``logsafe``), and
the keys a record adds for a machine (``FIELDS``: the access line's status, path, …) were
encoded the same way. JSON escapes on top of that, in ASCII only: no value can end the
line, close its string or add a key, whatever it holds.

This module imports the standard library only: the production server's own process loads
it from its file (deploy/serve.py), without importing the app, whose workers must import
it anew (a SIGHUP brings in a new release).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

#: The record attribute holding a line's own keys (a dict), set with ``extra={FIELDS: …}``.
FIELDS = "fields"


class JsonLines(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
    ``logger``, ``request_id``, ``message``, the record's ``FIELDS``, and ``exc_info`` (the
    traceback, one string) when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            # Set by the app's record factory (``logs``); granian's own lines have none.
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            # Added to the keys above, never in their place.
            line.update((key, value) for key, value in fields.items() if key not in line)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=True, separators=(",", ":"), default=str)
