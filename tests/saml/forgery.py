"""Responses an attacker could make from a real one (for the refusal tests): the same
assertion without its signature, with the NameID changed under the IdP's signature, changed
and signed again by a key of the attacker's own (xmlsec1, as an IdP signs), or by the IdP's
own key (``signed_with``: what only our profile checks can refuse), and the eight XML
signature wrapping attacks (``wrapped``).

The XML is edited with ``xml.dom.minidom``, which writes back every prefix, namespace
declaration and whitespace as it read them, so that what a signature covers is unchanged.
"""

from __future__ import annotations

import base64
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from xml.dom import minidom

SAMLP = "urn:oasis:names:tc:SAML:2.0:protocol"
SAML = "urn:oasis:names:tc:SAML:2.0:assertion"
MD = "urn:oasis:names:tc:SAML:2.0:metadata"
DS = "http://www.w3.org/2000/09/xmldsig#"
#: The elements whose ID attribute a signature may reference (for xmlsec1).
SIGNED_ELEMENTS = (f"{SAMLP}:Response", f"{SAML}:Assertion", f"{MD}:EntityDescriptor")
_SIGNATURE = re.compile(r"<ds:Signature\b.*?</ds:Signature>", re.S)
_XML_DECLARATION = re.compile(r"^<\?xml[^>]*\?>\s*")
_NAME_ID = re.compile(r"(<saml:NameID\b[^>]*>)([^<]*)(</saml:NameID>)")
#: The n-th signature of a document, for xmlsec1's --node-xpath.
_NTH_SIGNATURE = "(//*[local-name()='Signature' and namespace-uri()='" + DS + "'])[{}]"


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


def edited(xml: str, change: Callable[[minidom.Document], object]) -> str:
    """``xml`` after ``change`` edited its DOM (signatures untouched: sign it again, or not)."""
    document = minidom.parseString(xml)
    change(document)
    return str(document.documentElement.toxml())


def element(document: minidom.Document, namespace: str, name: str) -> minidom.Element:
    """The first ``name`` element of ``namespace`` in document order."""
    found = document.getElementsByTagNameNS(namespace, name)
    assert found, f"no {name} in the response"
    return found[0]  # type: ignore[no-any-return]


def with_attribute(xml: str, namespace: str, name: str, attribute: str, value: str | None) -> str:
    """``xml`` with ``attribute`` of every ``name`` element set to ``value`` (None: removed)."""

    def change(document: minidom.Document) -> None:
        for found in document.getElementsByTagNameNS(namespace, name):
            if value is None:
                found.removeAttribute(attribute)
            else:
                found.setAttribute(attribute, value)

    return edited(xml, change)


def with_text(xml: str, namespace: str, name: str, text: str) -> str:
    """``xml`` with the text of every ``name`` element replaced by ``text``."""

    def change(document: minidom.Document) -> None:
        for found in document.getElementsByTagNameNS(namespace, name):
            found.firstChild.data = text

    return edited(xml, change)


def without_element(xml: str, namespace: str, name: str) -> str:
    """``xml`` without its ``name`` elements."""

    def change(document: minidom.Document) -> None:
        for found in document.getElementsByTagNameNS(namespace, name):
            found.parentNode.removeChild(found)

    return edited(xml, change)


def with_doctype(xml: str, internal_subset: str) -> str:
    """``xml`` under a document type declaring ``internal_subset`` (entities, say), after
    its XML declaration if it has one."""
    body = _XML_DECLARATION.sub("", xml)
    return f'<?xml version="1.0"?>\n<!DOCTYPE samlp:Response [{internal_subset}]>\n{body}'


# -- XML signature wrapping ------------------------------------------------------------------
# The eight attacks of Somorovsky et al., "On Breaking SAML: Be Whoever You Want to Be"
# (USENIX Security 2012), after SAML Raider's. The signed element is kept, moved where
# the signature's reference still finds it; an evil copy, naming someone else, is put where
# a careless checker reads the assertion. For 3-8 the response's own signature, which the
# attacker cannot make again, is dropped.
XSW_VARIANTS = tuple(range(1, 9))
EVIL_ID = "_evil"


def wrapped(xml: str, variant: int, name_id: str) -> str:
    """``xml`` (a response and assertion both signed) under signature wrapping ``variant``,
    its evil assertion naming ``name_id``."""

    def wrap(document: minidom.Document) -> None:
        response = document.documentElement
        assertion = _child(response, SAML, "Assertion")
        if variant in (1, 2):
            # The response's signature over an unsigned copy of the genuine response: inside
            # the signature (1), or before it (2); the response read is the evil one.
            signature = _child(response, DS, "Signature")
            genuine = _without_signature(response)
            response.setAttribute("ID", EVIL_ID + "-response")
            response.replaceChild(_evil(assertion, name_id, signed=False), assertion)
            if variant == 1:
                signature.appendChild(genuine)
            else:
                response.insertBefore(genuine, signature)
            return
        response.removeChild(_child(response, DS, "Signature"))
        if variant in (3, 4, 7):
            evil = _evil(assertion, name_id, signed=False)
            if variant == 3:  # the evil assertion before the signed one
                response.insertBefore(evil, assertion)
            elif variant == 4:  # the signed assertion inside the evil one
                response.replaceChild(evil, assertion)
                evil.appendChild(assertion)
            else:  # the signed assertion under Extensions, the evil one, same ID, in its place
                extensions = document.createElementNS(SAMLP, "samlp:Extensions")
                response.insertBefore(extensions, _child(response, SAMLP, "Status"))
                evil.setAttribute("ID", assertion.getAttribute("ID"))
                response.replaceChild(evil, assertion)
                extensions.appendChild(assertion)
            return
        # 5, 6, 8: the evil assertion keeps the signature; an unsigned copy of the genuine one
        # is where its reference finds it: after it (5), inside the signature (6), in an
        # Object of the signature (8).
        evil = _evil(assertion, name_id, signed=True)
        genuine = _without_signature(assertion)
        response.replaceChild(evil, assertion)
        signature = _child(evil, DS, "Signature")
        if variant == 5:
            response.appendChild(genuine)
        elif variant == 6:
            signature.appendChild(genuine)
        else:
            holder = document.createElementNS(DS, "ds:Object")
            holder.appendChild(genuine)
            signature.appendChild(holder)

    assert variant in XSW_VARIANTS
    return edited(xml, wrap)


def _child(parent: minidom.Element, namespace: str, name: str) -> minidom.Element:
    for node in parent.childNodes:
        if node.namespaceURI == namespace and node.localName == name:
            return node  # type: ignore[no-any-return]
    raise AssertionError(f"no {name} in {parent.localName}")


def _without_signature(signed: minidom.Element) -> minidom.Element:
    copy: minidom.Element = signed.cloneNode(True)
    copy.removeChild(_child(copy, DS, "Signature"))
    return copy


def _evil(assertion: minidom.Element, name_id: str, *, signed: bool) -> minidom.Element:
    """A copy of ``assertion`` naming ``name_id``, with its own ID, with the signature
    element or without."""
    evil: minidom.Element = assertion.cloneNode(True) if signed else _without_signature(assertion)
    evil.setAttribute("ID", EVIL_ID + "-assertion")
    evil.getElementsByTagNameNS(SAML, "NameID")[0].firstChild.data = name_id
    return evil


# -- metadata signature wrapping ------------------------------------------------------------
#: How an IdP's genuine signed metadata is carried inside an attacker's unsigned document,
#: which names the same IdP with the attacker's key and single sign-on URL
#: (``metadata_wrapped``).
METADATA_WRAPPINGS = ("signed entity first", "signature lifted", "signature lifted, same ID")
EVIL_METADATA_ID = "_evil-metadata"


def metadata_wrapped(genuine_xml: str, evil_xml: str, wrapping: str) -> str:
    """``evil_xml`` (an EntityDescriptor) with ``genuine_xml`` (signed) in its Extensions:
    - "signed entity first": the genuine keeps its signature, and a copy of that signature,
      made to name the evil root, follows the Extensions (a checker that verifies the first
      signature of the document and trusts the root is fooled);
    - "signature lifted": the genuine's signature is the evil root's first child, still
      naming the genuine (it holds; a checker that does not ask what it covers is fooled);
    - "signature lifted, same ID": the same, the evil root taking the genuine's ID (which of
      the two the ID names is left to the verifier)."""
    document = minidom.parseString(evil_xml)
    evil = document.documentElement
    genuine = document.importNode(minidom.parseString(genuine_xml).documentElement, True)
    signature = _child(genuine, DS, "Signature")
    extensions = document.createElementNS(MD, "md:Extensions")
    evil.insertBefore(extensions, evil.firstChild)
    if wrapping == "signed entity first":
        evil.setAttribute("ID", EVIL_METADATA_ID)
        copy = signature.cloneNode(True)
        copy.getElementsByTagNameNS(DS, "Reference")[0].setAttribute("URI", f"#{EVIL_METADATA_ID}")
        extensions.appendChild(genuine)
        evil.insertBefore(copy, extensions.nextSibling)
    else:
        assert wrapping in METADATA_WRAPPINGS
        genuine.removeChild(signature)
        same_id = wrapping.endswith("same ID")
        evil.setAttribute("ID", genuine.getAttribute("ID") if same_id else EVIL_METADATA_ID)
        extensions.appendChild(genuine)
        evil.insertBefore(signature, extensions)
    return str(document.documentElement.toxml())


def with_signature_certificate(xml: str, cert: Path) -> str:
    """``xml`` with its first signature's KeyInfo naming ``cert`` (what it signs unchanged)."""

    def change(document: minidom.Document) -> None:
        key_info = element(document, DS, "Signature").getElementsByTagNameNS(DS, "X509Certificate")
        key_info[0].firstChild.data = pem_body(cert)

    return edited(xml, change)


# -- signing with xmlsec1 --------------------------------------------------------------------


def _id_attributes() -> list[str]:
    return [arg for element in SIGNED_ELEMENTS for arg in ("--id-attr:ID", element)]


def _xmlsec1(arguments: list[str], xml: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "xmlsec1-input.xml"
    source.write_text(xml)
    command = ["xmlsec1", *arguments, *_id_attributes(), str(source)]
    return subprocess.run(command, capture_output=True, text=True)


def _signature_count(xml: str) -> int:
    return len(minidom.parseString(xml).getElementsByTagNameNS(DS, "Signature"))


def signed_with(xml: str, key: Path, cert: Path, workdir: Path) -> str:
    """``xml`` with each of its signatures made again, in place, by ``key`` (their KeyInfo
    is left as it was): the assertion's, inside the response, first, so that the
    response's covers it as signed."""
    for n in range(_signature_count(xml), 0, -1):
        made = _xmlsec1(
            ["--sign", "--privkey-pem", f"{key},{cert}", "--node-xpath", _NTH_SIGNATURE.format(n)],
            xml,
            workdir,
        )
        assert made.returncode == 0, made.stderr
        xml = made.stdout
    return xml


def verifies_with(xml: str, cert: Path, workdir: Path) -> bool:
    """Whether every signature of ``xml`` is good by ``cert``'s key."""
    return all(
        _xmlsec1(
            ["--verify", "--pubkey-cert-pem", str(cert), "--node-xpath", _NTH_SIGNATURE.format(n)],
            xml,
            workdir,
        ).returncode
        == 0
        for n in range(1, _signature_count(xml) + 1)
    )


def own_key(workdir: Path) -> tuple[Path, Path]:
    """A key the IdP never had, and its self-signed certificate (made once per folder)."""
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
    return key, cert


def pem_body(cert: Path) -> str:
    """A PEM certificate's base64 body, as an X509Certificate element holds it."""
    return "".join(line for line in cert.read_text().splitlines() if "-----" not in line)


def verifies_with_own_key(xml: str, workdir: Path) -> bool:
    """Whether every signature of ``xml`` is good by ``signed_by_own_key``'s key."""
    return verifies_with(xml, own_key(workdir)[1], workdir)


def signed_by_own_key(xml: str, workdir: Path) -> str:
    """``xml`` with its signatures (the response's, the assertion's) made again, in place,
    by a key the IdP never had (their KeyInfo still names the IdP's certificate)."""
    key, cert = own_key(workdir)
    return signed_with(xml, key, cert, workdir)
