"""The IdP's metadata, cached and refreshed, against SimpleSAMLphp.

A key rollover at the IdP (a new signing key in its configuration and metadata) is
followed once the cached copy is due (freezegun moves the clock for the sign-in that
refreshes it; the IdP's response is checked at the real time); before that, the old key
stays in force. With the metadata URL failing, the last good copy stays in force with one
WARNING naming the provider, until its validUntil, after which sign-in stops
(``OAuthSignin``). The failing URL is a small HTTP server of the test's own in front of
SimpleSAMLphp's document: SimpleSAMLphp cannot be made to fail its metadata by itself.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp.metrics.families import REGISTRY
from webapp.settings import ConfigError

from ..support.oauth import error_of
from . import forgery, static_idp
from .forgery import MD
from .signin_steps import assert_refused, counts, post_response, provider_entry, start
from .simplesamlphp import SP_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e

PROVIDER_LOG = "webapp.saml.service_provider"


class MetadataServer:
    """Serves ``document`` at ``url`` (200), or fails (500) while ``failing``."""

    def __init__(self) -> None:
        self.document = ""
        self.failing = False
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = served.document.encode()
                self.send_response(500 if served.failing else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metadata"


@pytest.fixture(scope="module")
def metadata_server() -> Iterator[MetadataServer]:
    server = MetadataServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def rotated_idp(simplesamlphp: SimpleSamlIdp) -> Iterator[SimpleSamlIdp]:
    """The IdP, its signing key rolled over by the test; the old one back afterwards."""
    key, cert = simplesamlphp.signing_key_file, simplesamlphp.signing_key_file.with_suffix(".crt")
    saved = key.read_bytes(), cert.read_bytes()
    yield simplesamlphp
    key.write_bytes(saved[0])
    cert.write_bytes(saved[1])


def sent_to_idp(client: FlaskClient, idp: SimpleSamlIdp) -> None:
    """A sign-in starts: the browser goes to the IdP (not to an error)."""
    redirect = start(client)
    assert redirect.startswith(idp.base_url), redirect


def saml_app_at(make_oauth_app: Callable[..., Flask], url: str) -> Flask:
    return make_oauth_app([{"id": SP_ID, "type": "saml", "idp_metadata_url": url}])


def metadata_fetches() -> float:
    """How many times the metrics say the IdP's metadata was fetched, in this process."""
    labels = {"provider": SP_ID, "endpoint": "saml_metadata", "outcome": "ok"}
    return REGISTRY.get_sample_value("auth_provider_requests_total", labels) or 0.0


def test_a_key_rollover_at_the_idp_is_followed_once_the_metadata_is_due(
    make_oauth_app: Callable[..., Flask], rotated_idp: SimpleSamlIdp
) -> None:
    app = saml_app_at(make_oauth_app, rotated_idp.metadata_url)
    client = app.test_client()
    fetched_before = metadata_fetches()
    posted = rotated_idp.login(start(client), "ann")
    assert error_of(post_response(client, posted.saml_response)) is None
    assert metadata_fetches() == fetched_before + 1
    old_metadata = rotated_idp.metadata()
    rotated_idp.rotate_key()
    assert rotated_idp.metadata() != old_metadata

    # Within the cache time the old key is in force: the new key's response is refused.
    other = app.test_client()
    posted = rotated_idp.login(start(other), "ann")
    assert_refused(app, other, post_response(other, posted.saml_response), counts(app))
    assert metadata_fetches() == fetched_before + 1

    # Past it (no cacheDuration: the default hour), the next sign-in fetches the new key.
    with freeze_time(datetime.now(UTC) + timedelta(hours=1, minutes=1)):
        redirect = start(other)
    posted = rotated_idp.login(redirect, "ann")
    assert error_of(post_response(other, posted.saml_response)) is None
    assert other.get("/auth/session").json is not None
    assert metadata_fetches() == fetched_before + 2


def test_a_failing_metadata_url_leaves_the_last_good_copy_until_its_valid_until(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: SimpleSamlIdp,
    metadata_server: MetadataServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = datetime.now(UTC)
    valid_until = (now + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    metadata_server.failing = False
    metadata_server.document = re.sub(
        r"(<md:EntityDescriptor\b)",
        rf'\1 validUntil="{valid_until}" cacheDuration="PT30M"',
        simplesamlphp.metadata(),
        count=1,
    )
    assert valid_until in metadata_server.document
    app = saml_app_at(make_oauth_app, metadata_server.url)
    client = app.test_client()
    sent_to_idp(client, simplesamlphp)

    metadata_server.failing = True
    caplog.set_level(logging.WARNING, logger=PROVIDER_LOG)
    # Due (30 minutes), and failing: the last good copy signs in, with one warning.
    with freeze_time(now + timedelta(minutes=31)):
        sent_to_idp(client, simplesamlphp)
        sent_to_idp(client, simplesamlphp)
    warnings = [r for r in caplog.records if r.name == PROVIDER_LOG]
    assert len(warnings) == 1, warnings
    assert warnings[0].levelno == logging.WARNING and warnings[0].exc_info is None
    assert warnings[0].getMessage().startswith(f"{SP_ID}: IdP metadata not refreshed")
    assert "HTTP 500" in warnings[0].getMessage()

    # Past its validUntil, with no fresh copy, the IdP is unavailable.
    with freeze_time(now + timedelta(hours=3, minutes=1)):
        csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
        answer = client.post(f"/auth/signin/{SP_ID}", data={"csrfToken": csrf})
    assert error_of(answer) == "OAuthSignin"
    # The URL answers again: the fresh copy is used from the next try on.
    metadata_server.failing = False
    metadata_server.document = simplesamlphp.metadata()
    with freeze_time(now + timedelta(hours=3, minutes=7)):
        sent_to_idp(client, simplesamlphp)


# -- the metadata's own signature (idp_metadata_cert_file) -----------------------------------


def signed_file_entry(idp: SimpleSamlIdp, document: str, folder: Path) -> dict[str, str]:
    """A provider table reading ``document`` from a file, its signature checked by the
    IdP's metadata signing certificate."""
    path = folder / "idp-metadata.xml"
    path.write_text(document)
    return {
        "id": SP_ID,
        "type": "saml",
        "idp_metadata_file": str(path),
        "idp_metadata_cert_file": str(idp.metadata_signing_pair[1]),
    }


def test_the_idps_signed_metadata_is_checked_and_signs_in(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp, tmp_path: Path
) -> None:
    document = simplesamlphp.metadata()
    assert forgery.verifies_with(document, simplesamlphp.metadata_signing_pair[1], tmp_path)
    from_url = make_oauth_app([provider_entry(simplesamlphp)])
    from_file = make_oauth_app([signed_file_entry(simplesamlphp, document, tmp_path)])
    for app in (from_url, from_file):
        client = app.test_client()
        posted = simplesamlphp.login(start(client), "ann")
        assert error_of(post_response(client, posted.saml_response)) is None
        assert client.get("/auth/session").json is not None


def _evil_metadata(genuine: str, workdir: Path) -> str:
    """An unsigned document naming the genuine's IdP with the attacker's key and SSO URL."""
    entity_id = re.search(r'entityID="([^"]+)"', genuine)
    assert entity_id is not None
    return static_idp.idp_metadata(entity_id.group(1), EVIL_SSO, forgery.own_key(workdir)[1])


EVIL_SSO = "https://attacker.invalid/sso"
#: Each forgery of the IdP's signed metadata, and the reason start-up gives.
METADATA_FORGERIES: dict[str, tuple[Callable[[str, Path], str], str]] = {
    "unsigned": (lambda doc, _: forgery.unsigned(doc), "metadata not signed"),
    "changed after signing": (
        lambda doc, _: forgery.with_attribute(doc, MD, "SingleSignOnService", "Location", EVIL_SSO),
        "signature is not good",
    ),
    "signed by another key": (
        lambda doc, work: forgery.signed_with(doc, *forgery.own_key(work), work),
        "signature is not good",
    ),
    "signed by another key, named in its KeyInfo": (
        lambda doc, work: forgery.signed_with(
            forgery.with_signature_certificate(doc, forgery.own_key(work)[1]),
            *forgery.own_key(work),
            work,
        ),
        "signature is not good",
    ),
    "a document type declaration": (
        lambda doc, _: forgery.with_doctype(doc, '<!ENTITY sso "https://attacker.invalid">'),
        "metadata unreadable",
    ),
    **{
        f"wrapped: {wrapping}": (
            partial(
                lambda wrapping, doc, work: forgery.metadata_wrapped(
                    doc, _evil_metadata(doc, work), wrapping
                ),
                wrapping,
            ),
            reason,
        )
        for wrapping, reason in zip(
            forgery.METADATA_WRAPPINGS,
            ("metadata not signed", "does not cover its root", "signature is not good"),
            strict=True,
        )
    },
}


@pytest.mark.parametrize("forgery_name", METADATA_FORGERIES)
def test_a_forged_signed_metadata_file_stops_start_up(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: SimpleSamlIdp,
    tmp_path: Path,
    forgery_name: str,
) -> None:
    forge, reason = METADATA_FORGERIES[forgery_name]
    genuine = simplesamlphp.metadata()
    forged = forge(genuine, tmp_path)
    assert forged != genuine
    entry = signed_file_entry(simplesamlphp, forged, tmp_path)
    with pytest.raises(ConfigError) as raised:
        make_oauth_app([entry])
    message = str(raised.value)
    assert message.startswith(f"provider '{SP_ID}': idp_metadata_file: "), message
    assert reason in message, message
    assert "\n" not in message


def test_a_refreshed_metadata_whose_signature_fails_leaves_the_last_good_copy(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: SimpleSamlIdp,
    metadata_server: MetadataServer,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    genuine = simplesamlphp.metadata()
    metadata_server.failing = False
    metadata_server.document = genuine
    app = make_oauth_app(
        [{**provider_entry(simplesamlphp), "idp_metadata_url": metadata_server.url}]
    )
    client = app.test_client()
    sent_to_idp(client, simplesamlphp)

    # Due (the default hour), the URL now serves the document re-signed by another key,
    # its single sign-on moved: the last good copy stays, with one warning.
    moved = forgery.with_attribute(genuine, MD, "SingleSignOnService", "Location", EVIL_SSO)
    metadata_server.document = forgery.signed_with(moved, *forgery.own_key(tmp_path), tmp_path)
    caplog.set_level(logging.WARNING, logger=PROVIDER_LOG)
    with freeze_time(datetime.now(UTC) + timedelta(hours=1, minutes=1)):
        sent_to_idp(client, simplesamlphp)
    warnings = [r.getMessage() for r in caplog.records if r.name == PROVIDER_LOG]
    assert len(warnings) == 1, warnings
    assert warnings[0] == (
        f"{SP_ID}: IdP metadata not refreshed, the last good copy stays:"
        " the metadata's signature is not good by idp_metadata_cert_file's key"
    )
