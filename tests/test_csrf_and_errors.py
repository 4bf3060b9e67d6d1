"""CSRF on state-changing POSTs, and error routing (docs/errors.md)."""

from __future__ import annotations

import logging

import pytest

from webapp.errors import CODES, SIGNIN_CODES
from webapp.storage.models import Session, User

from .support.rows import row_count
from .support.signin import demo_sign_in


@pytest.mark.parametrize("token", [None, "", "forged", "IjAi.AAAA.BBBB"])
def test_signin_without_a_valid_csrf_token_changes_nothing(app, client, token):
    client.get("/auth/csrf")
    data = {"email": "ann@example.com", "password": "demo", "callbackUrl": "/account"}
    if token is not None:
        data["csrfToken"] = token
    r = client.post("/auth/callback/demo", data=data)
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/auth/signin?error=MissingCSRF"
    assert r.headers.get("Set-Cookie") is None or "session-token" not in r.headers["Set-Cookie"]
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


def test_a_token_from_another_browser_is_refused(app, client, auth):
    other = app.test_client()
    foreign = other.get("/auth/csrf").json["csrfToken"]
    client.get("/auth/csrf")
    r = client.post(
        "/auth/signin/demo",
        data={"csrfToken": foreign, "email": "ann@example.com", "password": "demo"},
    )
    assert r.headers["Location"].endswith("error=MissingCSRF")
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


MISSING_CSRF_URL = {"url": "http://localhost/auth/signin?error=MissingCSRF"}


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/auth/signin/demo", {"json": {"email": "ann@example.com", "password": "demo"}}),
        ("/auth/signin/demo", {"data": {"json": "true", "email": "ann@example.com"}}),
        ("/auth/callback/demo", {"data": {"json": "true", "email": "ann@example.com"}}),
        ("/auth/signin/email", {"headers": {"X-Auth-Return-Redirect": "1"}}),
        ("/auth/signout", {"data": {"json": "true", "csrfToken": "stale"}}),
        ("/auth/signout", {"headers": {"X-Auth-Return-Redirect": "1"}}),
    ],
)
def test_auth_js_clients_get_the_signin_page_url_for_a_csrf_failure(app, client, path, extra):
    # As @auth/core answers: 200 with the page to follow. Every Auth.js client does
    # ``new URL(data.url)`` on the answer; a 400 without ``url`` threw in the user's page.
    r = client.post(path, **extra)
    assert (r.status_code, r.json) == (200, MISSING_CSRF_URL)
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


def test_the_account_api_keeps_its_400_for_a_csrf_failure(client, auth):
    # Not an Auth.js route: its callers read ``error``, as for every other refusal.
    auth.signin()
    r = client.post("/account/api/sessions/end-others", json={})
    assert (r.status_code, r.json) == (400, {"error": "MissingCSRF"})


@pytest.mark.parametrize(
    ("asked", "status"),
    [({"data": {"json": "true"}}, 401), ({"headers": {"X-Auth-Return-Redirect": "1"}}, 200)],
    ids=["next-auth-v4-json-field", "auth-core-header"],
)
def test_a_failed_credentials_signin_in_json_mode(app, client, auth, asked, status):
    # next-auth v4's server answers its client's ``json=true`` with 401 (its ``signIn()``
    # then reports ``ok: false``); @auth/core answers the header with 200. Both name the
    # error, and the failure's kind in ``code`` as @auth/core does.
    data = {"email": "ann@example.com", "password": "wrong", "csrfToken": auth.csrf()}
    data.update(asked.get("data", {}))
    r = client.post("/auth/callback/demo", data=data, headers=asked.get("headers"))
    assert r.status_code == status
    assert r.json == {
        "url": "http://localhost/auth/signin?error=CredentialsSignin&code=credentials"
    }
    assert (row_count(app, User), row_count(app, Session)) == (0, 0)


def test_other_errors_in_json_mode_name_a_page_to_follow(client):
    # An oversized body, an unknown action and a wrong method are not Auth.js's coded
    # errors, but its clients still read ``url``: it names the error page.
    json_mode = {"X-Auth-Return-Redirect": "1"}
    big = client.post("/auth/signin/email", data={"email": "a" * 2_000_000}, headers=json_mode)
    assert big.status_code == 413
    assert big.json["url"] == "http://localhost/auth/error?error=RequestEntityTooLarge"
    unknown = client.post("/auth/no-such-action", headers=json_mode)
    assert unknown.status_code == 404
    assert unknown.json["url"] == "http://localhost/auth/error?error=NotFound"
    assert unknown.json["error"] == "Not Found"


def test_scripts_can_send_the_token_in_a_header(client, auth):
    token = auth.csrf()
    r = client.post(
        "/auth/signin/demo",
        data={"email": "ann@example.com", "password": "demo", "json": "true"},
        headers={"X-CSRFToken": token},
    )
    assert r.status_code == 200 and r.json == {"url": "http://localhost/"}


def test_signout_with_a_bad_token_keeps_the_session(app, client, auth):
    auth.signin()
    r = client.post("/auth/signout", data={"csrfToken": "nope"})
    assert r.headers["Location"].endswith("error=MissingCSRF")
    assert (row_count(app, User), row_count(app, Session)) == (1, 1)
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"


@pytest.mark.parametrize("code", sorted(SIGNIN_CODES))
def test_signin_codes_route_to_the_signin_page(client, code):
    r = client.get(f"/auth/error?error={code}&callbackUrl=/account")
    assert r.status_code == 302
    assert r.headers["Location"] == (
        f"http://localhost/auth/signin?error={code}&callbackUrl=%2Faccount"
    )
    page = client.get(r.headers["Location"]).get_data(as_text=True)
    assert CODES[code].title in page
    assert 'name="callbackUrl" value="/account"' in page


@pytest.mark.parametrize(
    "code,status",
    [("AccessDenied", 403), ("Configuration", 500), ("RateLimited", 429), ("Verification", 403)],
)
def test_error_page_codes_and_statuses(client, code, status):
    r = client.get(f"/auth/error?error={code}")
    assert r.status_code == status
    page = r.get_data(as_text=True)
    assert CODES[code].title in page
    assert r.headers["X-Request-ID"] in page
    assert 'href="/auth/signin"' in page


@pytest.mark.parametrize(
    "query", ["", "?error=", "?error=Nonsense", "?error=%3Cscript%3E", "?error=NotFound"]
)
def test_unknown_or_missing_code_is_a_generic_200(client, query):
    r = client.get(f"/auth/error{query}")
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert "Something went wrong" in page
    assert "<script>" not in page


SPOOF = "Your account is locked. Call +1-555-0100 now"


@pytest.mark.parametrize("path", ["/auth/error", "/auth/signin"])
def test_a_page_never_shows_a_code_it_does_not_know(client, path):
    # Content spoofing: the text of an unknown ``error`` must not reach the page, neither
    # as the "code" in the reference line nor in the islands' data.
    r = client.get(path, query_string={"error": SPOOF})
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert "Something went wrong" in page
    assert "555-0100" not in page and "locked" not in page


def test_every_code_has_its_own_message():
    assert len({c.message for c in CODES.values()}) == len(CODES)
    assert {c for c, entry in CODES.items() if entry.shown_on == "error"} == {
        "AccessDenied",
        "Configuration",
        "RateLimited",
        "Verification",
    }


def test_error_page_links_are_not_built_from_the_request(make_app):
    # A host the app answers to (an allowed alias; foreign ones get 400) but not AUTH_URL's.
    client = make_app(AUTH_ALLOWED_HOSTS="127.0.0.1").test_client()
    page = client.get("/auth/error?error=Verification", headers={"Host": "127.0.0.1:9999"})
    assert page.status_code == 403
    assert b"127.0.0.1" not in page.data and b"9999" not in page.data


def test_unexpected_errors_show_no_internals(make_app, caplog):
    from webapp.core.hooks import AuthHooks

    hooks = AuthHooks()

    @hooks.on_session
    def boom(user, session):
        raise RuntimeError("SELECT password FROM secrets -- tok_abc123")

    app = make_app(hooks=hooks)
    client = app.test_client()
    demo_sign_in(client)
    with caplog.at_level(logging.ERROR):
        r = client.get("/auth/session", headers={"Accept": "text/html"})
    assert r.status_code == 500
    body = r.get_data(as_text=True)
    assert "SELECT" not in body and "tok_abc123" not in body and "RuntimeError" not in body
    assert r.headers["X-Request-ID"] in body
    # The detail goes to the log, for the operator, under the id the page shows.
    [record] = [r for r in caplog.records if "unhandled error" in r.getMessage()]
    assert "tok_abc123" in caplog.text
    assert record.request_id == r.headers["X-Request-ID"]
    r = client.get("/auth/session", headers={"Accept": "application/json"})
    assert r.status_code == 500
    assert r.json == {"error": "InternalError", "requestId": r.headers["X-Request-ID"]}
