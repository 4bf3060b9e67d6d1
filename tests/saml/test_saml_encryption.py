"""Encrypted assertions against SimpleSAMLphp: the IdP encrypts the assertion to the
certificate it has for ``KEYED_SP_ID`` (``assertion.encryption``); an app holding that key
pair signs in, an app with another key pair cannot decrypt it and is refused with nothing
written, in one line of the log. Encryption is no signature: anyone can encrypt to our
certificate, so an assertion the test encrypts afresh (AES-128-CBC, RSA-OAEP, as
SimpleSAMLphp does) signs in only while the IdP's signature is inside."""

from __future__ import annotations

import base64
import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from flask import Flask

from ..support.oauth import error_of
from . import forgery
from .keyed_steps import keyed_app, post_response, start
from .signin_steps import assert_refused, counts
from .simplesamlphp import KEYED_SP_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e

MD = "{urn:oasis:names:tc:SAML:2.0:metadata}"


def test_our_metadata_offers_our_certificate_for_encryption(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp
) -> None:
    app = keyed_app(make_oauth_app, simplesamlphp)
    root = ET.fromstring(app.test_client().get(f"/auth/saml/{KEYED_SP_ID}/metadata").data)
    uses = {k.get("use") for k in root.findall(f"{MD}SPSSODescriptor/{MD}KeyDescriptor")}
    assert "encryption" in uses


def test_an_encrypted_assertion_signs_in(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp
) -> None:
    app = keyed_app(make_oauth_app, simplesamlphp)
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    xml = forgery.decoded(posted.saml_response)
    assert "EncryptedAssertion" in xml and "ann@acme.example" not in xml
    assert post_response(client, posted.saml_response).status_code == 302
    assert client.get("/auth/session").json["user"]["email"] == "ann@acme.example"  # type: ignore[index]
    assert counts(app) == (1, 1, 1, 1)


def test_an_assertion_encrypted_to_another_key_is_refused(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: SimpleSamlIdp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = keyed_app(make_oauth_app, simplesamlphp, own_keys=False)
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    assert "EncryptedAssertion" in forgery.decoded(posted.saml_response)
    before = counts(app)
    caplog.set_level(logging.INFO)
    assert_refused(app, client, post_response(client, posted.saml_response), before)
    # One line of ours says why; pysaml2's own lines for the failed checks are kept quiet.
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in said] == ["webapp.web.error_answers"], said
    assert "OAuthCallback: acme-keyed: SAML response" in said[0].getMessage()


_CIPHER_VALUES = re.compile(r"<xenc:CipherValue>([^<]*)</xenc:CipherValue>")
#: rsa-oaep-mgf1p: OAEP with SHA-1, as XML Encryption defines it without a DigestMethod.
_OAEP = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
_ENCRYPTED = re.compile(r"<saml:EncryptedAssertion>.*</saml:EncryptedAssertion>", re.S)


def decrypted_assertion(xml: str, key_file: Path) -> str:
    """The assertion SimpleSAMLphp encrypted in ``xml`` (RSA-OAEP, AES-128-CBC)."""
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    wrapped, data = (base64.b64decode(v) for v in _CIPHER_VALUES.findall(xml))
    session_key = key.decrypt(wrapped, _OAEP)
    decryptor = Cipher(algorithms.AES(session_key), modes.CBC(data[:16])).decryptor()
    plain = decryptor.update(data[16:]) + decryptor.finalize()
    return plain[: -plain[-1]].decode()


def encrypted_afresh(xml: str, assertion: str, cert_file: Path) -> str:
    """``xml`` with ``assertion`` encrypted to ``cert_file`` in place of its own, as anyone
    holding our certificate could."""
    public_key = x509.load_pem_x509_certificate(cert_file.read_bytes()).public_key()
    assert isinstance(public_key, rsa.RSAPublicKey)
    session_key, iv = os.urandom(16), os.urandom(16)
    plain = assertion.encode()
    pad = 16 - len(plain) % 16
    encryptor = Cipher(algorithms.AES(session_key), modes.CBC(iv)).encryptor()
    data = iv + encryptor.update(plain + bytes([pad]) * pad) + encryptor.finalize()
    wrapped = public_key.encrypt(session_key, _OAEP)
    xenc = "http://www.w3.org/2001/04/xmlenc#"
    encrypted = (
        f'<saml:EncryptedAssertion><xenc:EncryptedData xmlns:xenc="{xenc}" Type="{xenc}Element">'
        f'<xenc:EncryptionMethod Algorithm="{xenc}aes128-cbc"/>'
        '<ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><xenc:EncryptedKey>'
        f'<xenc:EncryptionMethod Algorithm="{xenc}rsa-oaep-mgf1p"/><xenc:CipherData>'
        f"<xenc:CipherValue>{base64.b64encode(wrapped).decode()}</xenc:CipherValue>"
        "</xenc:CipherData></xenc:EncryptedKey></ds:KeyInfo><xenc:CipherData>"
        f"<xenc:CipherValue>{base64.b64encode(data).decode()}</xenc:CipherValue>"
        "</xenc:CipherData></xenc:EncryptedData></saml:EncryptedAssertion>"
    )
    return _ENCRYPTED.sub(lambda _: encrypted, xml, count=1)


def test_an_encrypted_assertion_needs_the_idps_signature_all_the_same(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp
) -> None:
    app = keyed_app(make_oauth_app, simplesamlphp)
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    key_file, cert_file = simplesamlphp.sp_key_pair
    genuine = forgery.decoded(posted.saml_response)
    assertion = decrypted_assertion(genuine, key_file)
    assert "<ds:Signature" in assertion
    # The response's signature gone (the assertion's own stays inside the encryption).
    unsigned_response = forgery.unsigned(genuine)
    before = counts(app)
    for forged in (
        forgery.unsigned(assertion),
        forgery.with_name_id(forgery.unsigned(assertion), "bob"),
        forgery.with_name_id(assertion, "bob"),
    ):
        crafted = encrypted_afresh(unsigned_response, forged, cert_file)
        assert_refused(app, client, post_response(client, forgery.encoded(crafted)), before)
    # The same construction around the IdP's signed assertion signs in: the refusals were
    # the signature's.
    crafted = encrypted_afresh(unsigned_response, assertion, cert_file)
    assert error_of(post_response(client, forgery.encoded(crafted))) is None
