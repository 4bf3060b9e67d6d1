"""JSON from outside (request bodies, form fields, providers' answers), parsed one way.

The standard library raises ``RecursionError`` for deeply nested input (``[[[[…]]]]``,
about 1,000 levels), which slips past every ``except ValueError`` and became a 500. Here
it is a ``ValueError`` like any other malformed JSON, so each caller's refusal applies.
"""

from __future__ import annotations

import json
from typing import Any

from flask.json.provider import DefaultJSONProvider


def loads(data: str | bytes) -> Any:
    """``json.loads``, with too deep nesting refused as ``ValueError``."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


class JSONProvider(DefaultJSONProvider):
    """Flask's JSON (``request.get_json``) through ``loads``: a too deeply nested body is a
    400 (or ``None`` with ``silent=True``), as any malformed one. Keys keep their order
    (``GET providers`` lists providers in the configured order)."""

    sort_keys = False

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s)
