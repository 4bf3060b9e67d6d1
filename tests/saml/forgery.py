"""Responses an attacker could make from a real one (for the refusal tests): the same
assertion without its signature, with the NameID changed under the IdP's signature, or
changed and signed again by a key of the attacker's own (xmlsec1, as an IdP signs)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

#: The elements whose ID attribute a signature may reference (for xmlsec1).
SIGNED_ELEMENTS = (
    "urn:oasis:names:tc:SAML:2.0:protocol:Response",
    "urn:oasis:names:tc:SAML:2.0:assertion:Assertion",
)
_SIGNATURE = re.compile(r"<ds:Signature\b.*?</ds:Signature>", re.S)
_NAME_ID = re.compile(r"(<saml:NameID\b[^>]*>)([^<]*)(</saml:NameID>)")


def decoded(saml_response: str) -> str:
    return base64.b64decode(saml_response).decode()


def encoded(xml: str) -> str:
    return base64.b64encode(xml.encode()).decode()


def name_id_of(xml: str) -> str:
    found = _NAME_ID.search(xml)
    assert found is not None, "no NameID in the response"
    return found.group(2)


def with_name_id(xml: str, name_id: str) -> str:
    """``xml`` with the NameID's text replaced, signatures untouched."""
    changed, count = _NAME_ID.subn(lambda m: m.group(1) + name_id + m.group(3), xml)
    assert count == 1
    return changed


def unsigned(xml: str) -> str:
    """``xml`` without any signature (the response's or the assertion's)."""
    stripped, count = _SIGNATURE.subn("", xml)
    assert count >= 1, "the response was not signed to begin with"
    return stripped


def _id_attributes() -> list[str]:
    return [arg for element in SIGNED_ELEMENTS for arg in ("--id-attr:ID", element)]


def verifies_with_own_key(xml: str, workdir: Path) -> bool:
    """Whether every signature of ``xml`` is good by ``signed_by_own_key``'s key."""
    checked = workdir / "checked.xml"
    checked.write_text(xml)
    cert = workdir / "attacker.crt"
    verified = subprocess.run(
        ["xmlsec1", "--verify", "--pubkey-cert-pem", str(cert), *_id_attributes(), str(checked)],
        capture_output=True,
    )
    return verified.returncode == 0


def signed_by_own_key(xml: str, workdir: Path) -> str:
    """``xml`` with its signatures (the response's, the assertion's) made again, in place,
    by a key the IdP never had."""
    workdir.mkdir(parents=True, exist_ok=True)
    key, cert = workdir / "attacker.key", workdir / "attacker.crt"
    if not key.exists():
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=attacker", "-keyout", str(key), "-out", str(cert),
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
    source = workdir / "forged.xml"
    source.write_text(xml)
    signed = subprocess.run(
        ["xmlsec1", "--sign", "--privkey-pem", f"{key},{cert}", *_id_attributes(), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    return signed.stdout
