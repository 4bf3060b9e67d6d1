"""Route shapes, status codes and headers of every auth action (docs/routes.md)."""

from __future__ import annotations

import re

import pytest

NO_STORE = {"Cache-Control": "private, no-cache, no-store", "Pragma": "no-cache", "Expires": "0"}


def assert_no_store(response):
    for name, value in NO_STORE.items():
        assert response.headers.get(name) == value, name


def test_providers_lists_each_provider_and_sets_no_cookie(client):
    r = client.get("/auth/providers")
    assert r.status_code == 200
    assert r.headers.get("Set-Cookie") is None
    demo = r.json["demo"]
    assert demo == {
        "id": "demo",
        "name": "Demo account (development only)",
        "type": "credentials",
        "signinUrl": "http://localhost/auth/signin/demo",
        "callbackUrl": "http://localhost/auth/callback/demo",
    }


def test_session_signed_out_is_null_with_no_cache_headers(client):
    r = client.get("/auth/session")
    assert r.status_code == 200
    assert r.json is None
    assert r.data.strip() == b"null"
    assert_no_store(r)


def test_session_signed_in_shape(client, auth):
    auth.signin("Ann@Example.com")
    r = client.get("/auth/session")
    assert r.status_code == 200
    assert_no_store(r)
    assert set(r.json) == {"user", "expires"}
    assert r.json["user"] == {"name": "ann", "email": "ann@example.com", "image": None}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r.json["expires"])


def test_csrf_returns_token_and_sets_its_cookie(client):
    r = client.get("/auth/csrf")
    assert r.status_code == 200
    assert_no_store(r)
    assert isinstance(r.json["csrfToken"], str) and len(r.json["csrfToken"]) > 20
    assert "auth.csrf-token=" in r.headers["Set-Cookie"]


def test_signin_page_lists_providers_and_carries_csrf_and_callback(client):
    r = client.get("/auth/signin?callbackUrl=/account&email=ann@example.com")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert 'action="/auth/callback/demo"' in html
    assert 'name="csrfToken"' in html
    assert 'name="callbackUrl" value="/account"' in html
    assert 'value="ann@example.com"' in html


def test_signin_page_drops_an_unsafe_callback_url(client):
    html = client.get("/auth/signin?callbackUrl=//evil.example").get_data(as_text=True)
    assert "evil.example" not in html


def test_signin_page_shows_the_error_message(client):
    html = client.get("/auth/signin?error=CredentialsSignin").get_data(as_text=True)
    assert 'role="alert"' in html
    assert "did not match" in html


def test_signin_unknown_provider_redirects_with_signin_error(client, auth):
    r = client.post("/auth/signin/nope", data={"csrfToken": auth.csrf()})
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/auth/signin?error=Signin"


@pytest.mark.parametrize("how", ["form", "header"])
def test_json_mode_answers_url_instead_of_redirect(client, auth, how):
    data = {
        "csrfToken": auth.csrf(),
        "email": "ann@example.com",
        "password": "demo",
        "callbackUrl": "/account",
    }
    headers = {}
    if how == "form":
        data["json"] = "true"
    else:
        headers["X-Auth-Return-Redirect"] = "1"
    r = client.post("/auth/signin/demo", data=data, headers=headers)
    assert r.status_code == 200
    assert r.json == {"url": "http://localhost/account"}
    assert any(c.startswith("auth.session-token=") for c in r.headers.getlist("Set-Cookie"))


def test_signout_page_has_a_post_form(client, auth):
    auth.signin()
    html = client.get("/auth/signout").get_data(as_text=True)
    assert 'method="post"' in html and 'action="/auth/signout"' in html
    assert 'name="csrfToken"' in html


def test_signout_page_signed_out_offers_sign_in_not_sign_out(client):
    html = client.get("/auth/signout").get_data(as_text=True)
    assert "You are not signed in." in html
    assert 'action="/auth/signout"' not in html
    assert '<a class="button" href="/auth/signin">Sign in</a>' in html


def test_verify_request_page(client):
    r = client.get("/auth/verify-request?provider=email&type=email")
    assert r.status_code == 200
    assert "Check your e-mail" in r.get_data(as_text=True)


@pytest.mark.parametrize(
    "method,path",
    [
        ("put", "/auth/session"),
        ("delete", "/auth/signout"),
        ("patch", "/auth/csrf"),
        ("get", "/auth/signin/demo"),
        ("put", "/auth/callback/demo"),
        ("options", "/auth/providers"),
    ],
)
def test_other_methods_get_405_with_allow(client, method, path):
    r = getattr(client, method)(path)
    assert r.status_code == 405
    allowed = {m.strip() for m in r.headers["Allow"].split(",")}
    assert allowed <= {"GET", "HEAD", "POST"}
    assert allowed


@pytest.mark.parametrize("path", ["/auth/nope", "/auth/signin/demo/extra", "/auth/callback"])
def test_unknown_actions_get_404(client, path):
    assert client.get(path).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "status", "title"),
    [
        ("get", "/auth/nope", 404, "Page not found"),
        ("get", "/no-such-page", 404, "Page not found"),
        ("post", "/", 405, "That page cannot be used this way"),
        ("delete", "/account", 405, "That page cannot be used this way"),
        ("put", "/auth/signout", 405, "That page cannot be used this way"),
    ],
)
def test_http_errors_get_the_sites_own_page(client, method, path, status, title):
    # Not the framework's bare page: the site's layout, a title and a way on, the request
    # id as the reference; a 405 keeps its Allow header.
    r = getattr(client, method)(path)
    assert r.status_code == status
    page = r.get_data(as_text=True)
    assert f'<h1 id="card-title">{title}</h1>' in page
    assert r.headers["X-Request-ID"] in page
    assert 'href="/auth/signin"' in page or 'href="/"' in page
    assert "Werkzeug" not in page and "The requested URL" not in page
    if status == 405:
        assert r.headers["Allow"]
    if path.startswith("/auth/"):
        assert "no-store" in r.headers["Cache-Control"]


def test_an_oversized_form_gets_the_sites_own_413_page(client):
    r = client.post("/auth/signin/email", data={"email": "a" * 2_000_000})
    assert r.status_code == 413
    assert "Too much was sent" in r.get_data(as_text=True)


def test_every_response_carries_a_request_id(client):
    r = client.get("/auth/session")
    assert re.fullmatch(r"[0-9a-f]{32}", r.headers["X-Request-ID"])
    r = client.get("/auth/session", headers={"X-Request-ID": "proxy-id-1234"})
    assert r.headers["X-Request-ID"] == "proxy-id-1234"
    r = client.get("/auth/session", headers={"X-Request-ID": "bad id; <script>"})
    assert re.fullmatch(r"[0-9a-f]{32}", r.headers["X-Request-ID"])


def test_custom_base_path(make_app):
    app = make_app(AUTH_URL="http://localhost/api/auth")
    client = app.test_client()
    assert client.get("/api/auth/session").status_code == 200
    assert client.get("/auth/session").status_code == 404
    providers = client.get("/api/auth/providers").json
    assert providers["demo"]["signinUrl"] == "http://localhost/api/auth/signin/demo"


def test_providers_keep_the_configured_order(make_app, tmp_path):
    config = tmp_path / "auth.toml"
    config.write_text(
        "".join(f'[[providers]]\nid = "{pid}"\ntype = "credentials"\n' for pid in "zyx")
    )
    client = make_app(AUTH_CONFIG=str(config)).test_client()
    # Then the built-in ones: passkeys are on in development.
    assert list(client.get("/auth/providers").json) == ["z", "y", "x", "passkey"]


def test_the_providers_body_is_made_once_per_base_url_and_sent_as_jsonify_sends_json(client):
    first = client.get("/auth/providers")
    assert first.mimetype == "application/json"
    text = first.get_data(as_text=True)
    # Compact, as every other JSON answer (the benchmark's body check reads it so).
    assert '"signinUrl":"http://localhost/auth/signin/demo"' in text
    assert text.endswith("\n")
    assert client.get("/auth/providers").get_data(as_text=True) == text
