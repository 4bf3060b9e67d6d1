"""JSON from outside, parsed one way (webapp/core/jsonsafe.py): too deep nesting is malformed
JSON like any other, never a RecursionError (a 500)."""

from __future__ import annotations

import pytest

from webapp.core import jsonsafe
from webapp.storage.models import Session, User

from .support.rows import row_count

DEEP = "[" * 30_000 + "]" * 30_000  # 60 KB: under the 64 KiB body limit
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
#: Deeper than Python's recursion limit, small enough for the small bodies' own limits.
DEEP_SMALL = "[" * 2_000 + "]" * 2_000


@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT])
def test_too_deep_nesting_is_a_value_error(text):
    with pytest.raises(ValueError, match="nested too deeply"):
        jsonsafe.loads(text)
    assert jsonsafe.loads('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


def test_the_account_api_refuses_a_deep_body_and_deletes_nothing(app, client, auth):
    auth.signin()
    r = client.post(
        "/account/api/delete",
        data=DEEP,
        content_type="application/json",
        headers={"X-CSRFToken": auth.csrf()},
    )
    assert r.status_code == 400 and r.json["error"] == "ConfirmationRequired"
    assert (row_count(app, User), row_count(app, Session)) == (1, 1)


@pytest.mark.parametrize("path", ["/auth/signin/email", "/auth/signout", "/auth/callback/demo"])
def test_auth_posts_with_a_deep_body_get_a_clean_answer(app, client, auth, path):
    r = client.post(
        path, data=DEEP, content_type="application/json", headers={"X-CSRFToken": auth.csrf()}
    )
    assert r.status_code < 500 and "url" in r.json
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


def test_the_log_beacon_refuses_a_deep_body(client):
    r = client.post("/auth/_log", data=DEEP_SMALL, content_type="application/json")
    assert (r.status_code, r.json) == (400, {"error": "MalformedBody"})


def test_a_deep_passkey_answer_is_a_clean_refusal(app, client, auth):
    r = client.post(
        "/auth/callback/passkey",
        data={"action": "authenticate", "data": DEEP_SMALL},
        headers={"X-CSRFToken": auth.csrf(), "X-Auth-Return-Redirect": "1"},
    )
    assert r.status_code == 200 and "error=PasskeySignin" in r.json["url"]
    assert row_count(app, Session) == 0
