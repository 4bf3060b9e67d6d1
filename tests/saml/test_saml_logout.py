"""SAML single logout at ``{AUTH_URL}/saml/<id>/slo`` against SimpleSAMLphp, both ways
(``KEYED_SP_ID``: the IdP signs its logout messages and checks ours).

Ours: signing out here sends the browser to the IdP with a signed LogoutRequest; the IdP
ends its session (a new sign-in asks for the password again) and answers to /slo, which
sends the browser on. The IdP's (SimpleSAMLphp's ``initSLO.php``): its signed
LogoutRequest ends our session and is answered with our signed LogoutResponse, which the
IdP accepts. Refused, with status 400 and nothing changed: the IdP's request unsigned,
signed by another key (ours among them), signed by the IdP's key but for another
destination, from another issuer, too old or past its NotOnOrAfter, or a second time; a
LogoutResponse this browser did not ask for, or a second time.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, quote_plus, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from flask import Flask

from webapp.storage.models import Session, SpentSamlAssertion

from ..support.rows import row_count
from .keyed_steps import (
    DESTINATION,
    app_path,
    idp_redirect,
    keyed_app,
    sign_in,
    sign_out,
    start,
)
from .simplesamlphp import KEYED_SLO_URL, SimpleSamlIdp

pytestmark = pytest.mark.e2e


@pytest.fixture
def app(make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp) -> Flask:
    return keyed_app(make_oauth_app, simplesamlphp)


def idp_logout_request(idp: SimpleSamlIdp, browser: requests.Session) -> str:
    """The IdP's LogoutRequest to us (its URL at our /slo), as its initSLO.php starts it."""
    start = f"{idp.base_url}saml2/idp/initSLO.php?RelayState={idp.base_url}"
    url = idp_redirect(idp, browser, start)
    assert url.startswith(KEYED_SLO_URL + "?SAMLRequest="), url
    return url


def load_key(path: Path) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def changed(url: str, change: Callable[[str], str]) -> str:
    """``url`` with its SAMLRequest's XML passed through ``change`` (signature dropped)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    xml = zlib.decompress(base64.b64decode(query["SAMLRequest"]), -zlib.MAX_WBITS).decode()
    new_xml = change(xml)
    assert new_xml != xml
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated = packer.compress(new_xml.encode()) + packer.flush()
    query["SAMLRequest"] = base64.b64encode(deflated).decode()
    rebuilt = "&".join(f"{k}={quote_plus(v)}" for k, v in query.items())
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{rebuilt}"


def saml_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


#: LogoutRequests the IdP's key signs, each wrong in one way.
WRONG = {
    "Destination": lambda xml: xml.replace(KEYED_SLO_URL, KEYED_SLO_URL + "x"),
    "Issuer": lambda xml: re.sub(r"(<saml:Issuer>)[^<]*", r"\1https://evil.example/", xml),
    "IssueInstant": lambda xml: re.sub(
        r'IssueInstant="[^"]*"',
        f'IssueInstant="{saml_time(datetime.now(UTC) + timedelta(minutes=10))}"',
        xml,
    ),
    "NotOnOrAfter": lambda xml: re.sub(
        r"(<samlp:LogoutRequest\b)",
        rf'\1 NotOnOrAfter="{saml_time(datetime.now(UTC) - timedelta(minutes=2))}"',
        re.sub(r' NotOnOrAfter="[^"]*"', "", xml),
    ),
}


def resigned(url: str, key: rsa.RSAPrivateKey | None) -> str:
    """``url`` with its Signature made again by ``key`` (None: no signature at all)."""
    parts = urlsplit(url)
    pairs = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("Signature", "SigAlg")]
    if key is not None:
        pairs.append(("SigAlg", "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"))
    query = "&".join(f"{k}={quote_plus(v)}" for k, v in pairs)
    if key is not None:
        signature = key.sign(query.encode(), padding.PKCS1v15(), hashes.SHA256())
        query += "&Signature=" + quote_plus(base64.b64encode(signature).decode())
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{query}"


def test_signing_out_here_signs_out_at_the_idp(app: Flask, simplesamlphp: SimpleSamlIdp) -> None:
    client = app.test_client()
    browser = sign_in(client, simplesamlphp)
    # The sign-out page says so, as for an OpenID provider with RP-initiated logout.
    assert "also signs you out of Acme keyed" in client.get("/auth/signout").get_data(True)
    answer = sign_out(client)
    assert answer.status_code == 302
    assert client.get("/auth/session").json is None
    assert row_count(app, Session) == 0
    to_idp = str(answer.headers["Location"])
    assert to_idp.startswith(f"{simplesamlphp.base_url}saml2/idp/SingleLogoutService.php?")
    assert {"SAMLRequest", "SigAlg", "Signature"} <= dict(parse_qsl(urlsplit(to_idp).query)).keys()
    # SimpleSAMLphp checks our signature (validate.logout), ends its session, answers.
    back = idp_redirect(simplesamlphp, browser, to_idp)
    assert back.startswith(KEYED_SLO_URL + "?SAMLResponse="), back
    # Another browser cannot use that answer: it started no logout.
    assert app.test_client().get(app_path(back)).status_code == 400
    landed = client.get(app_path(back))
    assert landed.status_code == 302
    assert landed.headers["Location"] == f"http://localhost{DESTINATION}"
    # Spent: the same answer again is refused.
    assert client.get(app_path(back)).status_code == 400
    assert simplesamlphp.asks_for_password(start(client), browser)


def test_the_idps_logout_request_ends_our_session(app: Flask, simplesamlphp: SimpleSamlIdp) -> None:
    client = app.test_client()
    browser = sign_in(client, simplesamlphp)
    request_url = idp_logout_request(simplesamlphp, browser)
    idp_key = load_key(simplesamlphp.signing_key_file)
    forgeries = [
        resigned(request_url, None),
        resigned(request_url, rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        # Our own key is not the IdP's either.
        resigned(request_url, load_key(simplesamlphp.sp_key_pair[0])),
        *(resigned(changed(request_url, change), idp_key) for change in WRONG.values()),
    ]
    for forged in forgeries:
        assert app.test_client().get(app_path(forged)).status_code == 400, forged
        assert client.get("/auth/session").json is not None
    assert row_count(app, SpentSamlAssertion) == 1  # the sign-in's assertion alone

    # The same request signed again by the IdP's key passes: the refusals were the checks.
    answer = app.test_client().get(app_path(resigned(request_url, idp_key)))
    assert answer.status_code == 302
    assert client.get("/auth/session").json is None
    assert row_count(app, Session) == 0
    to_idp = str(answer.headers["Location"])
    assert to_idp.startswith(f"{simplesamlphp.base_url}saml2/idp/SingleLogoutService.php?")
    # SimpleSAMLphp checks our signed LogoutResponse and finishes, at the RelayState.
    assert idp_redirect(simplesamlphp, browser, to_idp) == simplesamlphp.base_url
    # An ID is accepted once.
    assert app.test_client().get(app_path(request_url)).status_code == 400
