"""SAML responses an attacker would post to the assertion consumer, each refused with
``OAuthCallback``, no row written and no session (``assert_refused``).

Each is made from one real response of SimpleSAMLphp (``genuine``, obtained once for the
module through the app's own AuthnRequest; the app, too, is the module's) answering a new
request of the test's browser: its InResponseTo is rewritten and the response signed again
with the IdP's own key (``Forger.signed``), so that a refusal of a change under a good
signature can only come from a check of the content, pysaml2's or ours
(webapp/saml/service_provider.py).
``test_the_forged_control_signs_in`` shows that the same making, without the change, is
accepted.

Covered here: XML signature wrapping (XSW1-XSW8), a response self-signed or signed by a key
outside the metadata while naming the IdP's certificate, every profile check (audience,
recipient, destination, time, issuer, InResponseTo, one assertion, the NameID), a comment
inside the NameID, external entities (a file, a loopback URL nobody may fetch) and entity
expansion, a response over the size bound, not base64, not XML, unsolicited responses, and
one response raced on two app instances. The unsigned response, one changed under the IdP's
signature or signed by another key, a replay and a response to another browser's request
are in test_saml_signin.py.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp import create_app
from webapp.providers import providers
from webapp.providers.saml import SamlProvider
from webapp.saml.assertion import ResponseRefused
from webapp.saml.service_provider import MAX_RESPONSE_CHARS
from webapp.storage.db import db
from webapp.storage.models import Account

from ..support.config import base_config
from ..support.databases import empty_tables
from ..support.oauth import error_of, write_providers_toml
from . import forgery, static_idp
from .forgery import DS, SAML, SAMLP
from .signin_steps import (
    assert_refused,
    counts,
    post_response,
    provider_entry,
    request_cookie,
    request_id_of,
    start,
    start_answer,
)
from .simplesamlphp import SP_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e

ELSEWHERE = "https://elsewhere.example/saml"
#: Another IdP of the same federation metadata, whose key the attacker holds.
ROGUE = "https://rogue.example/idp"


@pytest.fixture(scope="module")
def shared_app(
    database_url: str, simplesamlphp: SimpleSamlIdp, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flask]:
    """One app for the module: its service provider (built from the IdP's metadata at the
    first sign-in) is kept from test to test."""
    toml = tmp_path_factory.mktemp("saml-hostile") / "auth.toml"
    write_providers_toml(toml, [provider_entry(simplesamlphp)])
    app = create_app(base_config(database_url, AUTH_CONFIG=str(toml)), environ={})
    yield app
    with app.app_context():
        empty_tables()
        db.engine.dispose()


@pytest.fixture
def saml_app(shared_app: Flask) -> Iterator[Flask]:
    """``shared_app``, its tables emptied after each test."""
    yield shared_app
    with shared_app.app_context():
        empty_tables()


@pytest.fixture(scope="module")
def genuine(shared_app: Flask, simplesamlphp: SimpleSamlIdp) -> str:
    """A response SimpleSAMLphp signed (its XML): ann's, to a request of a browser of its
    own."""
    posted = simplesamlphp.login(start(shared_app.test_client()), "ann")
    return forgery.decoded(posted.saml_response)


def _in(minutes: float) -> str:
    """The time ``minutes`` from now, as SAML writes it."""
    return (datetime.now(UTC) + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Forger:
    """Makes responses from ``genuine`` and signs them with the IdP's own key."""

    genuine: str
    idp_key: Path
    idp_cert: Path
    workdir: Path

    def signed(self, xml: str) -> str:
        return forgery.signed_with(xml, self.idp_key, self.idp_cert, self.workdir)

    def answering(self, request_id: str) -> str:
        """``genuine`` answering ``request_id``, issued now (unsigned: sign it after any
        change)."""
        xml = self.genuine
        for namespace, name, attribute, value in (
            (SAMLP, "Response", "InResponseTo", request_id),
            (SAML, "SubjectConfirmationData", "InResponseTo", request_id),
            (SAMLP, "Response", "IssueInstant", _in(0)),
            (SAML, "Assertion", "IssueInstant", _in(0)),
            (SAML, "Conditions", "NotBefore", _in(-0.5)),
            (SAML, "Conditions", "NotOnOrAfter", _in(5)),
            (SAML, "SubjectConfirmationData", "NotOnOrAfter", _in(5)),
        ):
            xml = forgery.with_attribute(xml, namespace, name, attribute, value)
        return xml


@pytest.fixture
def forger(genuine: str, simplesamlphp: SimpleSamlIdp, tmp_path: Path) -> Forger:
    cert_dir = simplesamlphp.workdir / "cert"
    return Forger(genuine, cert_dir / "idp.key", cert_dir / "idp.crt", tmp_path)


@dataclass
class Browser:
    """A browser of the app with one sign-in started (its request ID in its cookie)."""

    app: Flask
    client: FlaskClient
    request_id: str

    def post(self, xml: str) -> Any:
        return post_response(self.client, forgery.encoded(xml))

    def assert_refuses(self, xml: str) -> None:
        before = counts(self.app)
        assert_refused(self.app, self.client, self.post(xml), before)

    def signed_in_as(self) -> str | None:
        session = self.client.get("/auth/session").json
        return session["user"]["email"] if session else None


@pytest.fixture
def browser(saml_app: Flask) -> Browser:
    client = saml_app.test_client()
    return Browser(saml_app, client, request_id_of(start(client)))


def test_the_forged_control_signs_in(browser: Browser, forger: Forger) -> None:
    """The making every test below starts from is accepted: their refusals are their
    change's."""
    answer = browser.post(forger.signed(forger.answering(browser.request_id)))
    assert error_of(answer) is None
    assert browser.signed_in_as() == "ann@acme.example"


# -- signatures --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", forgery.XSW_VARIANTS, ids=lambda n: f"XSW{n}")
def test_signature_wrapping_is_refused(browser: Browser, forger: Forger, variant: int) -> None:
    signed = forger.signed(forger.answering(browser.request_id))
    wrapped = forgery.wrapped(signed, variant, "bob")
    assert ">bob</saml:NameID>" in wrapped
    browser.assert_refuses(wrapped)
    # The response it was made from is still good: the refusal is the wrapping's.
    assert error_of(browser.post(signed)) is None
    assert browser.signed_in_as() == "ann@acme.example"


@pytest.mark.parametrize("key_info", ["own certificate", "IdP's certificate"])
def test_a_response_signed_by_a_key_outside_the_metadata_is_refused(
    browser: Browser, forger: Forger, simplesamlphp: SimpleSamlIdp, key_info: str
) -> None:
    """Self-signed (its certificate in KeyInfo), or naming the IdP's certificate in KeyInfo
    while signed by another key: only the metadata's key counts."""
    forged = forgery.signed_by_own_key(forger.answering(browser.request_id), forger.workdir)
    assert forgery.verifies_with_own_key(forged, forger.workdir)
    own_cert = forgery.own_key(forger.workdir)[1]
    named = own_cert if key_info == "own certificate" else forger.idp_cert
    # KeyInfo is outside what the signatures cover: the attacker writes what they like.
    forged = forgery.with_text(forged, DS, "X509Certificate", forgery.pem_body(named))
    browser.assert_refuses(forged)


# -- the profile's checks, under the IdP's own signature ---------------------------------


def _expired(xml: str) -> str:
    xml = forgery.with_attribute(xml, SAML, "Conditions", "NotOnOrAfter", _in(-3))
    return forgery.with_attribute(xml, SAML, "SubjectConfirmationData", "NotOnOrAfter", _in(-3))


def _second_assertion(xml: str) -> str:
    def add(document: Any) -> None:
        assertion = forgery.element(document, SAML, "Assertion")
        copy = assertion.cloneNode(True)
        copy.setAttribute("ID", "_second-assertion")
        assertion.parentNode.appendChild(copy)

    return forgery.edited(xml, add)


def _response_from_elsewhere(xml: str) -> str:
    def change(document: Any) -> None:
        response = document.documentElement
        issuer = forgery.element(document, SAML, "Issuer")
        assert issuer.parentNode is response
        issuer.firstChild.data = ELSEWHERE
        response.removeChild(forgery.element(document, DS, "Signature"))

    return forgery.edited(xml, change)


#: A change of the genuine response, and who refuses it: pysaml2, or our ``_profile_checks``.
PROFILE_BREACHES: dict[str, Callable[[str], str]] = {
    # pysaml2: an AudienceRestriction that does not name us.
    "audience of another SP": lambda x: forgery.with_text(x, SAML, "Audience", ELSEWHERE),
    # ours: none at all (pysaml2 checks one only when there is one).
    "no AudienceRestriction": lambda x: forgery.without_element(x, SAML, "AudienceRestriction"),
    # ours: the bearer confirmation is for another assertion consumer.
    "recipient of another SP": lambda x: forgery.with_attribute(
        x, SAML, "SubjectConfirmationData", "Recipient", ELSEWHERE
    ),
    # A confirmation by another method than bearer (what the browser carries).
    "sender-vouches confirmation": lambda x: forgery.with_attribute(
        x, SAML, "SubjectConfirmation", "Method", "urn:oasis:names:tc:SAML:2.0:cm:sender-vouches"
    ),
    # ours: a bearer confirmation without an end.
    "no NotOnOrAfter in the confirmation": lambda x: forgery.with_attribute(
        x, SAML, "SubjectConfirmationData", "NotOnOrAfter", None
    ),
    # pysaml2: sent to another destination.
    "destination of another SP": lambda x: forgery.with_attribute(
        x, SAMLP, "Response", "Destination", ELSEWHERE
    ),
    # ours: no Destination (pysaml2 checks it only when present).
    "no Destination": lambda x: forgery.with_attribute(x, SAMLP, "Response", "Destination", None),
    # pysaml2: past NotOnOrAfter (and the skew).
    "expired": _expired,
    # pysaml2: before NotBefore (beyond the skew).
    "not yet valid": lambda x: forgery.with_attribute(x, SAML, "Conditions", "NotBefore", _in(5)),
    # pysaml2: issued by another entity (it has no key for it).
    "issuer of another IdP": lambda x: forgery.with_text(x, SAML, "Issuer", ELSEWHERE),
    # ours: the response, unsigned, from another entity than its signed assertion.
    "response from another IdP": _response_from_elsewhere,
    # ours: two assertions, both signed.
    "two assertions": _second_assertion,
    # ours: a transient NameID would make a new account at every sign-in.
    "transient NameID": lambda x: forgery.with_attribute(
        x, SAML, "NameID", "Format", "urn:oasis:names:tc:SAML:2.0:nameid-format:transient"
    ),
    # ours: a blank NameID.
    "blank NameID": lambda x: forgery.with_name_id(x, "   "),
    # pysaml2: answering no request.
    "no InResponseTo": lambda x: forgery.with_attribute(
        forgery.with_attribute(x, SAML, "SubjectConfirmationData", "InResponseTo", None),
        SAMLP,
        "Response",
        "InResponseTo",
        None,
    ),
}


@pytest.mark.parametrize("breach", PROFILE_BREACHES)
def test_a_response_breaking_the_profile_is_refused_under_the_idps_signature(
    browser: Browser, forger: Forger, breach: str
) -> None:
    forged = forger.signed(PROFILE_BREACHES[breach](forger.answering(browser.request_id)))
    browser.assert_refuses(forged)


def test_a_response_from_another_idp_of_the_federation_is_refused(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp, forger: Forger
) -> None:
    """The metadata names several IdPs and the provider trusts one (``idp_entity_id``):
    another of them, signing with its own key, as the metadata says, is not that one."""
    rogue_key, rogue_cert = forgery.own_key(forger.workdir)
    metadata = forger.workdir / "federation.xml"
    metadata.write_text(
        static_idp.federation(
            simplesamlphp.metadata(), static_idp.idp_metadata(ROGUE, ROGUE + "/sso", rogue_cert)
        )
    )
    entry = {
        k: v
        for k, v in provider_entry(simplesamlphp).items()
        if k not in ("idp_metadata_url", "idp_metadata_cert_file")
    }
    app = make_oauth_app(
        [{**entry, "idp_metadata_file": str(metadata), "idp_entity_id": simplesamlphp.entity_id}]
    )
    client = app.test_client()
    browser = Browser(app, client, request_id_of(start(client)))
    forged = forgery.with_text(forger.answering(browser.request_id), SAML, "Issuer", ROGUE)
    browser.assert_refuses(forgery.signed_with(forged, rogue_key, rogue_cert, forger.workdir))


def test_a_confirmation_for_another_request_of_the_same_browser_is_refused(
    browser: Browser, forger: Forger
) -> None:
    """Both requests are this browser's (pysaml2 accepts either): the confirmation must be
    for the request the response answers."""
    other = request_id_of(start(browser.client))
    forged = forgery.with_attribute(
        forger.answering(browser.request_id), SAML, "SubjectConfirmationData", "InResponseTo", other
    )
    browser.assert_refuses(forger.signed(forged))


def test_a_comment_in_the_name_id_does_not_truncate_it(
    browser: Browser, forger: Forger, simplesamlphp: SimpleSamlIdp
) -> None:
    """CVE-2017-11427: the IdP signed ``ann.evil``; a comment put in after (canonical XML
    leaves comments out, so the signature still holds) must not make it ``ann``. The
    identity is the whole text the IdP signed."""
    signed = forger.signed(forgery.with_name_id(forger.answering(browser.request_id), "ann.evil"))
    commented = signed.replace(">ann.evil<", ">ann<!---->.evil<")
    assert commented != signed
    assert error_of(browser.post(commented)) is None
    with browser.app.app_context():
        subjects = db.session.scalars(sa.select(Account.provider_account_id)).all()
    assert subjects == [f"{simplesamlphp.entity_id} ann.evil"]


# -- the XML itself ----------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback port listening, never accepting: a connection shows in its backlog."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def _connected(listener: socket.socket) -> bool:
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_an_external_entity_naming_a_local_file_is_refused(
    browser: Browser, forger: Forger
) -> None:
    signed = forger.signed(forger.answering(browser.request_id))
    xxe = forgery.with_doctype(
        forgery.with_name_id(signed, "&xxe;"), '<!ENTITY xxe SYSTEM "file:///etc/hostname">'
    )
    browser.assert_refuses(xxe)


@pytest.mark.parametrize("entity", ["general", "parameter"])
def test_an_external_entity_on_a_loopback_url_is_refused_unfetched(
    browser: Browser, forger: Forger, listener: socket.socket, entity: str
) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/xxe"
    signed = forger.signed(forger.answering(browser.request_id))
    if entity == "general":
        forged = forgery.with_doctype(
            forgery.with_name_id(signed, "&xxe;"), f'<!ENTITY xxe SYSTEM "{url}">'
        )
    else:
        forged = forgery.with_doctype(signed, f'<!ENTITY % xxe SYSTEM "{url}"> %xxe;')
    assert not _connected(listener)
    browser.assert_refuses(forged)
    assert not _connected(listener)


def test_entity_expansion_is_refused(browser: Browser, forger: Forger) -> None:
    laughs = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)
    )
    signed = forger.signed(forger.answering(browser.request_id))
    browser.assert_refuses(forgery.with_doctype(forgery.with_name_id(signed, "&lol9;"), laughs))


@pytest.mark.parametrize(
    "value",
    ["not*base64!", forgery.encoded("not XML at all"), forgery.encoded("<unclosed")],
    ids=["not base64", "not XML", "broken XML"],
)
def test_a_value_that_is_no_response_is_refused(browser: Browser, value: str) -> None:
    before = counts(browser.app)
    assert_refused(browser.app, browser.client, post_response(browser.client, value), before)


def test_a_good_response_in_loose_base64_is_refused(browser: Browser, forger: Forger) -> None:
    """Characters outside the base64 alphabet, which a lenient decoder (pysaml2's) would
    drop, are refused before it."""
    value = forgery.encoded(forger.signed(forger.answering(browser.request_id)))
    loose = "*".join(value[n : n + 64] for n in range(0, len(value), 64))
    before = counts(browser.app)
    assert_refused(browser.app, browser.client, post_response(browser.client, loose), before)


def test_a_good_response_in_base64_lines_signs_in(browser: Browser, forger: Forger) -> None:
    """Some IdPs wrap the base64 in lines of 76 characters (MIME's): line breaks are no
    other character, and the response is the same."""
    value = forgery.encoded(forger.signed(forger.answering(browser.request_id)))
    wrapped = "\r\n".join(value[n : n + 76] for n in range(0, len(value), 76))
    assert error_of(post_response(browser.client, wrapped)) is None
    assert browser.signed_in_as() == "ann@acme.example"


def test_a_response_over_the_body_limit_is_refused_unread(browser: Browser) -> None:
    """Over the app's body limit (64 KiB), Flask refuses the form before the view runs."""
    before = counts(browser.app)
    answer = post_response(browser.client, "A" * (64 * 1024 + 1))
    assert answer.status_code == 413
    assert counts(browser.app) == before
    assert browser.client.get("/auth/session").json is None


def test_a_signed_response_over_the_size_bound_is_refused(browser: Browser, forger: Forger) -> None:
    """``MAX_RESPONSE_CHARS`` (under the app's body limit) holds for any caller of
    ``check_response``: a good response padded over it is refused unread."""
    padding = "x" * MAX_RESPONSE_CHARS
    padded = forgery.with_text(
        forger.answering(browser.request_id), SAML, "AttributeValue", padding
    )
    value = forgery.encoded(forger.signed(padded))
    with browser.app.app_context():
        provider = providers()[SP_ID]
        assert isinstance(provider, SamlProvider)
        with pytest.raises(ResponseRefused, match="size bound"):
            provider.service_provider.check_response(value, [browser.request_id])


# -- whose request -----------------------------------------------------------------------


def test_an_unsolicited_response_is_refused(saml_app: Flask, forger: Forger) -> None:
    """A browser with no request waiting (no cookie), posting a good response to a request
    it never made."""
    stranger = saml_app.test_client()
    forged = forger.signed(forger.answering("id-nobody-asked"))
    before = counts(saml_app)
    assert_refused(saml_app, stranger, post_response(stranger, forgery.encoded(forged)), before)


def test_one_response_raced_on_two_instances_signs_in_once(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: SimpleSamlIdp,
    forger: Forger,
    database_url: str,
) -> None:
    """Two apps on one database, two browsers with the same request's cookie, posting one
    response at the same moment: the database's record of the assertion lets one through."""
    if not database_url.startswith("postgresql"):
        pytest.skip("two instances share a PostgreSQL database")
    apps = [make_oauth_app([provider_entry(simplesamlphp)]) for _ in range(2)]
    first = apps[0].test_client()
    started = start_answer(first)
    twin = apps[1].test_client()
    name, _, value = request_cookie(started).split(";")[0].partition("=")
    twin.set_cookie(name, value, path=f"/auth/callback/{SP_ID}")
    response = forgery.encoded(forger.signed(forger.answering(request_id_of(started.location))))
    clients = [first, twin]
    barrier = threading.Barrier(2)
    answers: list[Any] = [None, None]

    def post(n: int) -> None:
        barrier.wait()
        answers[n] = post_response(clients[n], response)

    threads = [threading.Thread(target=post, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(str(error_of(a)) for a in answers) == ["None", "OAuthCallback"]
    assert counts(apps[0]) == (1, 1, 1, 1)
    signed_in = [c.get("/auth/session").json is not None for c in clients]
    assert sorted(signed_in) == [False, True]
