"""Keyed hashes: HMAC-SHA256 under a key derived from AUTH_SECRET for one purpose.

What the app keeps or compares of an identifier, token or code without keeping the value
itself (rate-limit counters and the audit trail's ``subject_hash``, the bearer token cache,
e-mail link tokens, codes and browser values, a passkey's user handle). Keyed, so a stored
hash cannot be checked against a guessed or found value without the secret; one key per
purpose (``Settings.derive_key``), so no two uses can be matched against each other.

Stored values depend on these bytes: a change to the algorithm, the key derivation, the
encoding or a caller's truncation makes every stored hash unfindable
(``tests/test_keyed_hashes.py`` pins them). Unkeyed SHA-256 of random tokens (session
tokens, spent challenges) needs no key and is not made here.
"""

from __future__ import annotations

import hmac

from webapp.settings import current_settings


def _hmac(key: bytes, value: str) -> bytes:
    return hmac.digest(key, value.encode(), "sha256")


def keyed_digest(purpose: str, value: str) -> bytes:
    """Return the 32-byte HMAC-SHA256 of ``value`` under the current key for ``purpose``."""
    return _hmac(current_settings().derive_key(purpose), value)


def keyed_hash(purpose: str, value: str, *, length: int | None = None) -> str:
    """Return ``keyed_digest`` as lower-case hex, cut to its first ``length`` digits."""
    return keyed_digest(purpose, value).hex()[:length]


def keyed_hashes(purpose: str, value: str) -> list[str]:
    """Return the hex hash of ``value`` under the current key for ``purpose``, then under
    those of AUTH_PREVIOUS_SECRETS: to find a value stored before a rotation."""
    return [_hmac(key, value).hex() for key in current_settings().derive_keys(purpose)]
