"""A software passkey authenticator for the HTTP tests.

It stands in for a hardware authenticator (a security key, a phone, a password manager):
it makes ES256 key pairs with ``cryptography`` and builds what the browser posts, byte
for byte as the WebAuthn spec lays it out: the authenticator data (RP ID hash, flags,
signature counter, attested credential data with a COSE key), the client data JSON, the
attestation object (format "none", CBOR with cbor2, py_webauthn's own dependency) and the
assertion signature. Every field can be bent (origin, RP ID, type, counter, flags) to
build the answers the server must refuse. The browser suite
(tests/browser/test_passkeys.py) uses Chromium's virtual authenticator instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Credential:
    """A passkey this authenticator holds (a discoverable credential)."""

    id: bytes
    key: ec.EllipticCurvePrivateKey
    rp_id: str
    user_handle: bytes
    sign_count: int = 0

    def cose_public_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        # kty EC2, alg ES256, crv P-256, x, y (RFC 9053).
        return cbor2.dumps(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )


@dataclass
class SoftAuthenticator:
    """A platform authenticator with user verification, for one origin.

    ``counts``: whether it keeps a signature counter (many synced passkeys send 0 always).
    """

    origin: str = "http://localhost"
    aaguid: bytes = bytes(16)
    backed_up: bool = False
    counts: bool = True
    credentials: list[Credential] = field(default_factory=list)

    def _flags(self, *, uv: bool, attested: bool = False) -> int:
        flags = UP | (UV if uv else 0) | (AT if attested else 0)
        return flags | (BE | BS if self.backed_up else 0)

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": challenge, "origin": origin or self.origin},
            separators=(",", ":"),
        ).encode()

    def register(
        self,
        options: dict[str, Any],
        *,
        uv: bool = True,
        origin: str | None = None,
        rp_id: str | None = None,
        kind: str = "webauthn.create",
    ) -> dict[str, Any]:
        """Create a passkey for ``options`` (``webauthn-options``' ``register`` options);
        return the registration response as @simplewebauthn/browser posts it."""
        rp = rp_id or options["rp"]["id"]
        excluded = {d["id"] for d in options.get("excludeCredentials", [])}
        if any(b64url(c.id) in excluded for c in self.credentials if c.rp_id == rp):
            raise AssertionError("InvalidStateError: this authenticator is excluded")
        credential = Credential(
            id=os.urandom(32),
            key=ec.generate_private_key(ec.SECP256R1()),
            rp_id=rp,
            user_handle=unb64url(options["user"]["id"]),
        )
        auth_data = (
            hashlib.sha256(rp.encode()).digest()
            + bytes([self._flags(uv=uv, attested=True)])
            + struct.pack(">I", 0)
            + self.aaguid
            + struct.pack(">H", len(credential.id))
            + credential.id
            + credential.cose_public_key()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data(kind, options["challenge"], origin)
        self.credentials.append(credential)
        return {
            "id": b64url(credential.id),
            "rawId": b64url(credential.id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal", "hybrid"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def authenticate(
        self,
        options: dict[str, Any],
        credential: Credential | None = None,
        *,
        uv: bool = True,
        origin: str | None = None,
        rp_id: str | None = None,
        kind: str = "webauthn.get",
        sign_count: int | None = None,
    ) -> dict[str, Any]:
        """Sign ``options``' challenge with ``credential`` (default: the newest passkey);
        return the authentication response as @simplewebauthn/browser posts it.

        The counter moves forward by one per signature (when the authenticator counts);
        ``sign_count`` sends another value instead.
        """
        credential = credential or self.credentials[-1]
        if sign_count is None:
            if self.counts:
                credential.sign_count += 1
            sign_count = credential.sign_count
        rp = rp_id or options["rpId"]
        auth_data = (
            hashlib.sha256(rp.encode()).digest()
            + bytes([self._flags(uv=uv)])
            + struct.pack(">I", sign_count)
        )
        client_data = self._client_data(kind, options["challenge"], origin)
        signature = credential.key.sign(
            auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": b64url(credential.id),
            "rawId": b64url(credential.id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": b64url(credential.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }
