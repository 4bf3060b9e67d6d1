"""Short-lived values kept in the browser, sealed: it can neither read nor forge them.

AES-GCM under a key derived from AUTH_SECRET per ``purpose``, with ``bound_to`` as
associated data, so a value cannot be read, changed, or moved to another purpose or place
(another provider, another check). The expiry is inside the sealed payload as well as on
the cookie, so an old cookie a browser kept is still refused. Values sealed under one of
AUTH_PREVIOUS_SECRETS still open during a rotation.
"""

from __future__ import annotations

import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from webapp.core.clock import now_timestamp
from webapp.core.sealing import b64url_decode, b64url_encode
from webapp.settings import current_settings

_NONCE_BYTES = 12


def seal(value: str, *, purpose: str, bound_to: str, max_age: int) -> str:
    """Return ``value`` sealed for ``purpose`` and ``bound_to``, good for ``max_age`` seconds."""
    key = current_settings().derive_key(purpose)
    nonce = os.urandom(_NONCE_BYTES)
    payload = json.dumps({"v": value, "exp": int(now_timestamp()) + max_age}).encode()
    sealed = nonce + AESGCM(key).encrypt(nonce, payload, bound_to.encode())
    return b64url_encode(sealed)


def open_sealed(token: str, *, purpose: str, bound_to: str) -> str | None:
    """Return the value ``seal`` sealed; None if forged, moved, expired or malformed."""
    if len(token) > 8192:
        return None
    try:
        raw = b64url_decode(token)
    except (ValueError, TypeError):
        return None
    if len(raw) <= _NONCE_BYTES:
        return None
    for key in current_settings().derive_keys(purpose):
        try:
            payload = json.loads(
                AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], bound_to.encode())
            )
        except (InvalidTag, ValueError):
            continue
        if not isinstance(payload, dict) or payload.get("exp", 0) < now_timestamp():
            return None
        value = payload.get("v")
        return value if isinstance(value, str) else None
    return None
