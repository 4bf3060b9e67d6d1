"""One JSON line per request to DOT (``/o/…``) in ``requests.jsonl``, for the tests.

What a test needs to tell what reached the provider, and nothing secret: the method, the
path, the status, the names of the form fields sent, the client id (from the form or HTTP
Basic), the grant type and token type hint, and a SHA-256 of any ``token``,
``refresh_token`` or ``device_code`` sent (never the value, never a client secret).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from django.conf import settings

_LOCK = threading.Lock()
_HASHED = ("token", "refresh_token", "device_code")


def _basic_client_id(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return unquote_plus(decoded.partition(":")[0])


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.path = settings.DATA_DIR / "requests.jsonl"

    def __call__(self, request: Any) -> Any:
        if not request.path.startswith("/o/"):
            return self.get_response(request)
        request.body  # noqa: B018 (read and kept first, so DOT can still read the body)
        form = request.POST if request.method == "POST" else request.GET
        entry: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "fields": sorted(form.keys()),
            "basic_client_id": _basic_client_id(request.headers.get("Authorization", "")),
            "client_id": form.get("client_id"),
            "grant_type": form.get("grant_type"),
            "token_type_hint": form.get("token_type_hint"),
        }
        for name in _HASHED:
            if name in form:
                entry[name + "_sha256"] = hashlib.sha256(form[name].encode()).hexdigest()
        response = self.get_response(request)
        entry["status"] = response.status_code
        with _LOCK, self.path.open("a") as log:
            log.write(json.dumps(entry) + "\n")
        return response
