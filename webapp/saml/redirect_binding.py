"""A SAML message received by the HTTP-Redirect binding (single logout): the query string
as the browser sent it, its signature checked over the exact bytes received, then the
DEFLATE-compressed, base64 message opened within a size bound.

The signature covers ``SAMLRequest``/``SAMLResponse``, ``RelayState`` and ``SigAlg`` as
they appear in the URL (SAML bindings 3.4.4.1), so the raw query is read here, never a
decoded and re-encoded copy (pysaml2's check re-encodes, which another encoder's URL does
not survive). Only RSA with SHA-256 or stronger is accepted.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote_plus

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from webapp.saml.assertion import ResponseRefused

#: The longest query read, and the largest message once inflated.
MAX_QUERY_CHARS = 64 * 1024
MAX_MESSAGE_BYTES = 256 * 1024
SIGNATURE_ALGORITHMS: dict[str, type[hashes.HashAlgorithm]] = {
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256": hashes.SHA256,
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384": hashes.SHA384,
    "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512": hashes.SHA512,
}
_PARAMETERS = ("SAMLRequest", "SAMLResponse", "RelayState", "SigAlg", "Signature")


@dataclass(frozen=True)
class RedirectMessage:
    #: "SAMLRequest" or "SAMLResponse".
    kind: str
    xml: str
    relay_state: str | None


def read_signed(raw_query: str, certificates: Iterable[str]) -> RedirectMessage:
    """The message of ``raw_query``, signed by the key of one of ``certificates`` (base64
    DER, as metadata holds them); raise ResponseRefused."""
    if len(raw_query) > MAX_QUERY_CHARS:
        raise ResponseRefused("query over the size bound")
    raw: dict[str, str] = {}
    for part in raw_query.split("&"):
        name, _, value = part.partition("=")
        if name in _PARAMETERS:
            if name in raw:
                raise ResponseRefused(f"{name} given twice")
            raw[name] = value
    kinds = [kind for kind in ("SAMLRequest", "SAMLResponse") if kind in raw]
    if len(kinds) != 1:
        raise ResponseRefused("not exactly one of SAMLRequest and SAMLResponse")
    kind = kinds[0]
    if "Signature" not in raw or "SigAlg" not in raw:
        raise ResponseRefused("not signed")
    algorithm = SIGNATURE_ALGORITHMS.get(unquote_plus(raw["SigAlg"]))
    if algorithm is None:
        raise ResponseRefused("SigAlg is not RSA with SHA-256 or stronger")
    signed = "&".join(f"{n}={raw[n]}" for n in (kind, "RelayState", "SigAlg") if n in raw)
    signature = _base64(unquote_plus(raw["Signature"]))
    if not any(_verifies(c, signature, signed.encode(), algorithm()) for c in certificates):
        raise ResponseRefused("the signature is not by a key in the IdP's metadata")
    relay_state = unquote_plus(raw["RelayState"]) if "RelayState" in raw else None
    return RedirectMessage(kind, _inflate(_base64(unquote_plus(raw[kind]))), relay_state)


def _verifies(
    certificate: str, signature: bytes, data: bytes, algorithm: hashes.HashAlgorithm
) -> bool:
    try:
        key = x509.load_der_x509_certificate(_base64("".join(certificate.split()))).public_key()
    except (ValueError, ResponseRefused):
        return False
    if not isinstance(key, rsa.RSAPublicKey):
        return False
    try:
        key.verify(signature, data, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        return False
    return True


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ResponseRefused("not base64") from None


def _inflate(data: bytes) -> str:
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        xml = inflater.decompress(data, MAX_MESSAGE_BYTES)
    except zlib.error:
        raise ResponseRefused("not DEFLATE-compressed") from None
    if inflater.unconsumed_tail:
        raise ResponseRefused("message over the size bound")
    try:
        return xml.decode("utf-8")
    except UnicodeDecodeError:
        raise ResponseRefused("message not UTF-8") from None
