"""The IdP metadata's own signature, when the provider names the certificate that signs it
(``idp_metadata_cert_file``): a federation's aggregate, or an IdP that signs its document
(ADFS, Entra ID, Shibboleth, SimpleSAMLphp with ``metadata.sign.enable``). Without it, the
metadata is trusted as the https URL or the file delivers it.

A document counts as signed only when its root element (EntityDescriptor or
EntitiesDescriptor) carries the signature as its first child, and that signature's one
reference names the root by its ID: xmlsec1 (through pysaml2's backend) then checks that
very signature, started at the root (``--node-id``), with the configured key only. An
element signed somewhere inside an unsigned root (signature wrapping) is not a signed
document.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import ParseError

from cryptography import x509
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring
from saml2.sigver import CryptoBackendXmlSec1, SignatureError, XmlsecError

from webapp.saml.idp_metadata import MetadataUnavailable
from webapp.settings import ConfigError

_MD = "urn:oasis:names:tc:SAML:2.0:metadata"
_DS = "http://www.w3.org/2000/09/xmldsig#"
#: The root elements a metadata document may have, as ElementTree names them.
_ROOTS = {f"{{{_MD}}}EntityDescriptor", f"{{{_MD}}}EntitiesDescriptor"}


def checked_certificate(provider_id: str, path: Path) -> Path:
    """``idp_metadata_cert_file``, read and parsed now; raise ConfigError."""
    where = f"provider {provider_id!r}: idp_metadata_cert_file"
    try:
        x509.load_pem_x509_certificate(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(f"{where}: not a PEM certificate") from None
    return path


def verify(document: str, cert_file: Path, xmlsec: str) -> None:
    """Raise MetadataUnavailable unless ``document``'s root is signed by ``cert_file``'s
    key (see above)."""
    try:
        root = fromstring(document, forbid_dtd=True)
    except (ParseError, DefusedXmlException) as exc:
        raise MetadataUnavailable(f"metadata unreadable: {type(exc).__name__}") from None
    if root.tag not in _ROOTS:
        raise MetadataUnavailable("not a metadata document")
    signature = next(iter(root), None)
    if signature is None or signature.tag != f"{{{_DS}}}Signature":
        raise MetadataUnavailable("metadata not signed (no signature as the root's first child)")
    root_id = root.get("ID")
    references = signature.findall(f"{{{_DS}}}SignedInfo/{{{_DS}}}Reference")
    if not root_id or len(references) != 1 or references[0].get("URI") != f"#{root_id}":
        raise MetadataUnavailable("the metadata's signature does not cover its root by its ID")
    node_name = root.tag[1:].replace("}", ":")  # xmlsec1's --id-attr form: namespace:name
    try:
        CryptoBackendXmlSec1(xmlsec).validate_signature(
            document, str(cert_file), "pem", node_name, root_id
        )
    except (SignatureError, XmlsecError):
        raise MetadataUnavailable(
            "the metadata's signature is not good by idp_metadata_cert_file's key"
        ) from None
