"""A SAML provider's configuration: every mistake stops start-up naming the provider and
the field; our key pair is configured (and checked) or, in development only, made."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from webapp.providers import providers
from webapp.saml import keys
from webapp.saml.config import DEFAULT_ATTRIBUTES
from webapp.settings import ConfigError

BASE = {
    "id": "acme",
    "type": "saml",
    "name": "Acme staff",
    "idp_metadata_url": "https://idp.acme.example/saml2/idp/metadata.php",
}


def make_pair(folder: Path, name: str) -> tuple[Path, Path]:
    key, cert = folder / f"{name}.key", folder / f"{name}.crt"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"idp_metadata_url": None}, "give exactly one of idp_metadata_url and idp_metadata_file"),
        ({"idp_metadata_file": "idp.xml"}, "give exactly one of idp_metadata_url"),
        ({"idp_metadata_url": "http://idp.acme.example/md"}, "idp_metadata_url must be https"),
        (
            {"idp_metadata_url": None, "idp_metadata_file": "missing.xml"},
            "idp_metadata_file: cannot",
        ),
        ({"domains": "acme.example"}, "domains must be a list"),
        ({"domains": ["acme.example", "not a domain"]}, "domains: 'not a domain' is not"),
        ({"attributes": {"mail": ["mail"]}}, "attributes: unknown detail 'mail'"),
        ({"attributes": {"email": []}}, "attributes.email must name one or more"),
        ({"sp_key_file": "sp.key"}, "give both sp_key_file and sp_cert_file"),
        ({"sp_key_file": "none.key", "sp_cert_file": "none.crt"}, "cannot read our key pair"),
        ({"idp_metadata_cert_file": "none.crt"}, "idp_metadata_cert_file: cannot read it"),
        ({"idp_metadata": "https://x"}, "unknown field 'idp_metadata'"),
        ({"name": ""}, "name must be a non-empty string"),
    ],
)
def test_configuration_errors_name_provider_and_field(
    make_oauth_app: Callable[..., Flask], change: dict[str, Any], message: str
) -> None:
    entry = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match="^provider 'acme': " + message):
        make_oauth_app([entry])


def test_a_certificate_of_another_key_is_refused(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    key, _ = make_pair(tmp_path, "ours")
    _, other = make_pair(tmp_path, "other")
    with pytest.raises(ConfigError, match="sp_cert_file is not the certificate of sp_key_file"):
        make_oauth_app([{**BASE, "sp_key_file": str(key), "sp_cert_file": str(other)}])


def test_the_metadata_signing_certificate_must_be_a_certificate(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    key, _ = make_pair(tmp_path, "signer")
    with pytest.raises(ConfigError, match="^provider 'acme': idp_metadata_cert_file: not a PEM"):
        make_oauth_app([{**BASE, "idp_metadata_cert_file": str(key)}])


def test_a_metadata_file_that_cannot_be_used_stops_start_up(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    """A file is there at start-up: what would fail every sign-in fails start-up instead."""
    metadata = tmp_path / "idp.xml"
    entry = {k: v for k, v in BASE.items() if k != "idp_metadata_url"}
    for document, reason in [
        ("<md:EntityDescriptor", "IdP metadata unusable: "),
        ('<EntityDescriptor entityID="x"/>', "the metadata names no IdP"),
    ]:
        metadata.write_text(document)
        with pytest.raises(ConfigError) as raised:
            make_oauth_app([{**entry, "idp_metadata_file": str(metadata)}])
        assert str(raised.value).startswith(f"provider 'acme': idp_metadata_file: {reason}")


def test_outside_development_auth_url_must_be_https(make_oauth_app: Callable[..., Flask]) -> None:
    with pytest.raises(ConfigError, match="^provider 'acme': type saml needs an https AUTH_URL"):
        make_oauth_app([BASE], APP_ENV="production", AUTH_URL="http://example.com/auth")


def test_outside_development_our_key_pair_must_be_configured() -> None:
    with pytest.raises(ConfigError, match="sp_key_file and sp_cert_file are required"):
        keys.load_or_make("acme", None, None, development=False)


def test_a_configured_key_pair_is_the_one_in_our_metadata(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    key, cert = make_pair(tmp_path, "ours")
    app = make_oauth_app([{**BASE, "sp_key_file": str(key), "sp_cert_file": str(cert)}])
    published = app.test_client().get("/auth/saml/acme/metadata").get_data(as_text=True)
    body = "".join(cert.read_text().splitlines()[1:-1])
    assert body in published.replace("\n", "")


def test_attribute_names_replace_the_defaults_detail_by_detail(
    make_oauth_app: Callable[..., Flask],
) -> None:
    app = make_oauth_app([{**BASE, "attributes": {"email": "urn:example:mail"}}])
    with app.app_context():
        attributes = providers()["acme"].config.attributes  # type: ignore[attr-defined]
    assert attributes == {"email": ("urn:example:mail",), "name": DEFAULT_ATTRIBUTES["name"]}


def test_the_metadata_route_is_only_for_saml_providers(
    make_oauth_app: Callable[..., Flask],
) -> None:
    client = make_oauth_app([BASE]).test_client()
    assert client.get("/auth/saml/acme/metadata").status_code == 200
    assert client.get("/auth/saml/demo/metadata").status_code == 404
    assert client.get("/auth/saml/nobody/metadata").status_code == 404
