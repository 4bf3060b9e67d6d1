"""Values sealed at rest: AES-256-GCM under a key derived from AUTH_SECRET.

For secrets the app must read back (a provider's access, refresh and ID tokens), where a
hash will not do. A sealed value is text: ``v1.<key id>.<base64url(nonce | ciphertext)>``.
The key id (the first 8 hex digits of the key's SHA-256) names the secret it was sealed
under, so opening needs no trial decryption and ``flask auth rotate-secrets`` finds the
rows still under an old secret with one ``LIKE``. Each value is bound to its ``context``
(the column it lives in) as associated data: moved to another column it no longer opens.

Keys come from ``AUTH_SECRET`` and then ``AUTH_PREVIOUS_SECRETS`` (``Settings.derive_keys``
with the purpose below); sealing always uses the current one.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from webapp.settings import current_settings

#: The key-derivation purpose: no other use of AUTH_SECRET shares this key.
PURPOSE = "sealed-at-rest"
VERSION = "v1"
_NONCE_BYTES = 12


class Unreadable(Exception):
    """A sealed value that no configured secret opens (or that is not a sealed value)."""


@functools.lru_cache(maxsize=8)
def _keyring(secret: str, previous: tuple[str, ...]) -> tuple[tuple[str, AESGCM], ...]:
    conf = current_settings()
    keys = [conf.derive_key(PURPOSE, s) for s in (secret, *previous)]
    return tuple((hashlib.sha256(key).hexdigest()[:8], AESGCM(key)) for key in keys)


def _keys() -> tuple[tuple[str, AESGCM], ...]:
    conf = current_settings()
    return _keyring(conf.secret, conf.previous_secrets)


def current_key_id() -> str:
    """Return the id of the key new values are sealed under (the current secret's)."""
    return _keys()[0][0]


def current_prefix() -> str:
    """Return how every value sealed under the current secret begins."""
    return f"{VERSION}.{current_key_id()}."


def b64url_encode(raw: bytes) -> str:
    """``raw`` as unpadded base64url, the form every sealed value and challenge takes."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    """The bytes of unpadded base64url ``text``; ``binascii.Error`` (a ValueError) if it is
    not base64url."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(plaintext: str, *, context: str) -> str:
    """Seal ``plaintext`` under the current secret, bound to ``context``."""
    key_id, aead = _keys()[0]
    nonce = os.urandom(_NONCE_BYTES)
    sealed = aead.encrypt(nonce, plaintext.encode(), context.encode())
    body = b64url_encode(nonce + sealed)
    return f"{VERSION}.{key_id}.{body}"


def open_sealed(stored: str, *, context: str) -> str:
    """Return the plaintext of a value ``seal`` made for ``context``; raise Unreadable."""
    version, _, rest = stored.partition(".")
    key_id, _, body = rest.partition(".")
    if version != VERSION or not body:
        raise Unreadable("not a sealed value")
    aead = next((a for kid, a in _keys() if kid == key_id), None)
    if aead is None:
        raise Unreadable(f"sealed under key {key_id}, which no configured secret gives")
    try:
        raw = b64url_decode(body)
        plaintext = aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode())
    except (InvalidTag, ValueError, binascii.Error) as exc:
        raise Unreadable(f"does not open under key {key_id} for {context}") from exc
    return plaintext.decode()
