"""Self-tests of the test provider's helpers (tests/op/server.mjs, ``NodeOP``): signing with
the provider's key, RP-initiated and back-channel logout, and the device authorization
grant, talking only to the provider (and to a fake RP), never to the app."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import KeySet

from .support.oauth import (
    DEVICE_GRANT,
    DEVICE_INTERVAL,
    DEVICE_SHORT_TTL,
    OP_KID,
    POST_LOGOUT_REDIRECT_URI,
    NodeOP,
    fake_idp,
)

pytestmark = pytest.mark.e2e

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def published_keys(node_op: NodeOP) -> KeySet:
    return KeySet.import_key_set(requests.get(node_op.discovery()["jwks_uri"], timeout=10).json())


def claims_of(node_op: NodeOP, token: str) -> dict[str, Any]:
    return dict(jwt.decode(token, published_keys(node_op)).claims)


def error(response: requests.Response) -> str:
    assert response.status_code == 400, response.text
    return str(response.json()["error"])


def test_sign_uses_the_key_at_jwks_uri(node_op: NodeOP) -> None:
    token = node_op.sign({"iss": node_op.issuer, "sub": "alice"}, {"typ": "logout+jwt"})
    decoded = jwt.decode(token, published_keys(node_op))
    assert decoded.header == {"alg": "RS256", "kid": OP_KID, "typ": "logout+jwt"}
    assert decoded.claims == {"iss": node_op.issuer, "sub": "alice"}
    assert "kid" not in jwt.decode(node_op.sign({}, {"kid": None}), node_op.op_key).header


def test_device_flow_approved(node_op: NodeOP) -> None:
    before = node_op.grant_count("op-device", DEVICE_GRANT)
    start = node_op.device_authorization(nonce="ignored")
    assert start["verification_uri"] == node_op.issuer + "/device"
    assert start["verification_uri_complete"] == (
        node_op.issuer + "/device?" + urlencode({"user_code": start["user_code"]})
    )
    assert (start["interval"], start["expires_in"]) == (DEVICE_INTERVAL, 600)
    assert error(node_op.device_token(start["device_code"])) == "authorization_pending"

    node_op.approve_device(start["user_code"], "bob")
    response = node_op.device_token(start["device_code"])
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert {"access_token", "id_token", "refresh_token"} <= set(tokens)
    claims = claims_of(node_op, tokens["id_token"])
    assert (claims["sub"], claims["aud"]) == ("bob", "op-device")
    assert "nonce" not in claims and "sid" not in claims
    assert node_op.grant_count("op-device", DEVICE_GRANT) == before + 1
    # The code is used up: a further poll is refused (and revokes the grant).
    assert error(node_op.device_token(start["device_code"])) == "invalid_grant"


def test_device_flow_public_client(node_op: NodeOP) -> None:
    start = node_op.device_authorization("op-device-public", scope="openid")
    node_op.approve_device(start["user_code"], "carol")
    response = node_op.device_token(start["device_code"], "op-device-public")
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("how", ["abort", "account"])
def test_device_flow_denied(node_op: NodeOP, how: str) -> None:
    start = node_op.device_authorization()
    if how == "abort":
        node_op.approve_device(start["user_code"], approve=False)
    else:
        node_op.approve_device(start["user_code"], "deny")
    assert error(node_op.device_token(start["device_code"])) == "access_denied"


def test_device_code_expires(node_op: NodeOP) -> None:
    start = node_op.device_authorization()
    node_op.expire_device_code(start["user_code"])
    assert error(node_op.device_token(start["device_code"])) == "expired_token"
    with pytest.raises(AssertionError, match="ExpiredError"):
        node_op.approve_device(start["user_code"])

    start = node_op.device_authorization("op-device-short")
    assert start["expires_in"] == DEVICE_SHORT_TTL
    deadline = time.monotonic() + DEVICE_SHORT_TTL + 1
    answer = "authorization_pending"
    while answer in ("authorization_pending", "slow_down") and time.monotonic() < deadline:
        time.sleep(0.2)
        answer = error(node_op.device_token(start["device_code"], "op-device-short"))
    assert answer == "expired_token"


def test_polling_too_fast_slows_down(node_op: NodeOP) -> None:
    start = node_op.device_authorization()
    assert error(node_op.device_token(start["device_code"])) == "authorization_pending"
    assert error(node_op.device_token(start["device_code"])) == "slow_down"
    polls = node_op.device_polls("op-device")[-2:]
    assert [p["answer"] for p in polls] == ["authorization_pending", "slow_down"]


def test_end_session_round_trip(node_op: NodeOP) -> None:
    browser = requests.Session()
    tokens = node_op.code_tokens(browser, "op-basic", nonce="n-1")
    assert "op_session" in browser.cookies
    params = {
        "id_token_hint": tokens["id_token"],
        "client_id": "op-basic",
        "post_logout_redirect_uri": POST_LOGOUT_REDIRECT_URI,
        "state": "st-1",
    }
    url = node_op.discovery()["end_session_endpoint"] + "?" + urlencode(params)
    assert node_op.end_session(browser, url) == POST_LOGOUT_REDIRECT_URI + "?state=st-1"
    assert "op_session" not in browser.cookies
    # Without a provider session the same request still ends up at the app.
    assert node_op.end_session(browser, url) == POST_LOGOUT_REDIRECT_URI + "?state=st-1"


def test_backchannel_logout(node_op: NodeOP) -> None:
    with fake_idp() as rp:  # the fake's HTTP server plays the app (the RP)
        auth_url = rp.issuer + "/auth"
        good, bad = (f"bcl-{time.time_ns()}-{n}" for n in ("good", "bad"))
        rp.routes[f"/auth/backchannel-logout/{good}"] = lambda request: (200, {}, b"")
        rp.routes[f"/auth/backchannel-logout/{bad}"] = lambda request: (400, {}, b"")
        assert node_op.provider_config(good, method="client_secret_basic")["client_id"] == good
        node_op.add_client(good)  # for the app at APP_ORIGIN; replaced at once:
        meta = node_op.add_client(good, auth_url=auth_url)
        assert meta["backchannel_logout_uri"] == f"{auth_url}/backchannel-logout/{good}"
        assert meta["backchannel_logout_session_required"] is True
        assert node_op.provider_config(good)["client_id"] == good
        node_op.add_client(bad, auth_url=auth_url, session_required=False)
        browser = requests.Session()
        id_token = node_op.code_tokens(browser, good, auth_url=auth_url)["id_token"]
        sid = claims_of(node_op, id_token)["sid"]
        assert "sid" not in claims_of(node_op, node_op.code_tokens(browser, "op-basic")["id_token"])
        node_op.code_tokens(browser, bad, auth_url=auth_url)

        node_op.end_op_session(browser)

        [delivery] = node_op.wait_backchannel(good)
        assert (delivery["status"], delivery["ok"], delivery["sid"]) == (200, True, sid)
        [request] = [r for r in rp.requests if r.path == f"/auth/backchannel-logout/{good}"]
        assert request.form["logout_token"] == delivery["logout_token"]
        decoded = jwt.decode(delivery["logout_token"], published_keys(node_op))
        assert decoded.header == {"alg": "RS256", "kid": OP_KID, "typ": "logout+jwt"}
        claims = decoded.claims
        assert claims["exp"] == claims["iat"] + 120 and claims["jti"]
        assert claims["events"] == {BACKCHANNEL_EVENT: {}}
        assert (claims["iss"], claims["aud"]) == (node_op.issuer, good)
        assert (claims["sub"], claims["sid"]) == ("alice", sid)
        assert "nonce" not in claims

        [failed] = node_op.wait_backchannel(bad)
        assert (failed["status"], failed["ok"], failed["sid"]) == (400, False, None)
        assert "sid" not in jwt.decode(failed["logout_token"], node_op.op_key).claims
        assert node_op.backchannel_deliveries("op-basic") == []


def test_device_flow_in_a_browser_signed_in_already(node_op: NodeOP) -> None:
    browser = requests.Session()
    node_op.code_tokens(browser, "op-basic", "carol")
    start = node_op.device_authorization()
    node_op.approve_device(start["user_code"], "alice", session=browser)  # carol approves
    response = node_op.device_token(start["device_code"])
    assert response.status_code == 200, response.text
    assert claims_of(node_op, response.json()["id_token"])["sub"] == "carol"
