"""IdP-initiated sign-in (an unsolicited response) against SimpleSAMLphp, whose
``SSOService.php?spentityid=`` starts one: refused by default, accepted with
``allow_idp_initiated = true`` (landing on the default page), once; and even then a
response to another browser's request is refused, and the signature checks hold for an
unsolicited response as for any (signature wrapping, unsigned, changed, another key)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import quote

import pytest
from flask import Flask

from ..support.oauth import error_of
from . import forgery
from .signin_steps import assert_refused, counts, post_response, provider_entry, start
from .simplesamlphp import SP_ENTITY_ID, SimpleSamlIdp

pytestmark = pytest.mark.e2e


def unsolicited(idp: SimpleSamlIdp) -> str:
    """An unsolicited SAMLResponse for ann, as the IdP's own portal would send it."""
    posted = idp.login(
        f"{idp.base_url}saml2/idp/SSOService.php?spentityid={quote(SP_ENTITY_ID)}", "ann"
    )
    assert "InResponseTo" not in forgery.decoded(posted.saml_response).split("<saml:Assertion")[0]
    return posted.saml_response


def test_an_unsolicited_response_is_refused_by_default(
    saml_app: Flask, simplesamlphp: SimpleSamlIdp
) -> None:
    client = saml_app.test_client()
    response = unsolicited(simplesamlphp)
    assert_refused(saml_app, client, post_response(client, response), counts(saml_app))
    # A sign-in of its own pending in this browser changes nothing.
    start(client)
    assert_refused(saml_app, client, post_response(client, response), counts(saml_app))


def test_allowed_an_unsolicited_response_signs_in_once(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp
) -> None:
    app = make_oauth_app([{**provider_entry(simplesamlphp), "allow_idp_initiated": True}])
    client = app.test_client()
    response = unsolicited(simplesamlphp)
    answer = post_response(client, response)
    assert error_of(answer) is None
    assert answer.headers["Location"] == "http://localhost/"
    assert client.get("/auth/session").json["user"]["email"] == "ann@acme.example"  # type: ignore[index]
    # One use.
    stranger = app.test_client()
    assert_refused(app, stranger, post_response(stranger, response), counts(app))
    # A response to another browser's request is still refused.
    victim = app.test_client()
    posted = simplesamlphp.login(start(victim), "ann")
    attacker = app.test_client()
    assert_refused(app, attacker, post_response(attacker, posted.saml_response), counts(app))


#: What an attacker makes of an unsolicited response (with no request to answer, only the
#: signature and the profile checks stand between it and a session).
UNSOLICITED_FORGERIES: dict[str, Callable[[str, Path], str]] = {
    **{
        f"XSW{n}": partial(lambda n, xml, _: forgery.wrapped(xml, n, "bob"), n)
        for n in forgery.XSW_VARIANTS
    },
    "unsigned": lambda xml, _: forgery.unsigned(xml),
    "NameID changed under the IdP's signature": lambda xml, _: forgery.with_name_id(xml, "bob"),
    "signed by a key outside the metadata": lambda xml, work: forgery.signed_by_own_key(
        forgery.with_name_id(xml, "bob"), work
    ),
}


def test_allowed_the_signature_checks_still_hold_for_unsolicited_responses(
    make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp, tmp_path: Path
) -> None:
    """Each forgery of a genuine unsolicited response is refused, with nothing written;
    then the genuine one signs in (the refusals were the forgeries')."""
    app = make_oauth_app([{**provider_entry(simplesamlphp), "allow_idp_initiated": True}])
    genuine = forgery.decoded(unsolicited(simplesamlphp))
    for name, forge in UNSOLICITED_FORGERIES.items():
        client = app.test_client()
        forged = forge(genuine, tmp_path)
        assert forged != genuine, name
        answer = post_response(client, forgery.encoded(forged))
        assert error_of(answer) == "OAuthCallback", name
        assert counts(app) == (0, 0, 0, 0), name
        assert client.get("/auth/session").json is None, name
    client = app.test_client()
    assert error_of(post_response(client, forgery.encoded(genuine))) is None
    assert client.get("/auth/session").json["user"]["email"] == "ann@acme.example"  # type: ignore[index]
