"""Our key pair as a service provider: its certificate is in our metadata (what an IdP
encrypts assertions to and checks our signatures with); the private key never leaves.

Configured per provider (``sp_key_file``, ``sp_cert_file``: PEM, relative to the TOML
file), as a client's private key for ``private_key_jwt`` is; an IdP registers the
certificate, so it must outlive restarts and deployments: outside development a saml
provider without them is refused at start-up. In development, without them, a key pair is
made at start-up for the process (RSA 2048, a self-signed certificate for ten years), in a
private temporary folder that is removed at exit: xmlsec1, which pysaml2 runs, reads keys
from files. (A key derived from AUTH_SECRET would survive restarts, but an RSA key derived
from a secret is a construction of our own; a development IdP re-reads our metadata.)
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from webapp.settings import ConfigError


@dataclass(frozen=True)
class KeyPair:
    key_file: Path
    cert_file: Path


def load_or_make(
    provider_id: str, key_file: Path | None, cert_file: Path | None, *, development: bool
) -> KeyPair:
    """The configured key pair, checked (PEM, the certificate of that key); or, in
    development with none configured, a new one. Raise ConfigError."""
    where = f"provider {provider_id!r}"
    if key_file is None or cert_file is None:
        if not development:
            raise ConfigError(
                f"{where}: sp_key_file and sp_cert_file are required outside development"
                " (our key pair, which the identity provider registers)"
            )
        return _made(provider_id)
    try:
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read our key pair: {exc.strerror}") from None
    except (ValueError, TypeError):
        raise ConfigError(
            f"{where}: sp_key_file must be an unencrypted PEM private key and sp_cert_file"
            " a PEM certificate"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey) or cert.public_key() != key.public_key():
        raise ConfigError(f"{where}: sp_cert_file is not the certificate of sp_key_file's RSA key")
    return KeyPair(key_file, cert_file)


def _made(provider_id: str) -> KeyPair:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"webapp saml {provider_id}")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    folder = Path(tempfile.mkdtemp(prefix="webapp-saml-"))  # mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    key_file, cert_file = folder / "sp.key", folder / "sp.crt"
    key_file.touch(mode=0o600)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return KeyPair(key_file, cert_file)
