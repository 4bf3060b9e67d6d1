"""Auth.js's ``pages``: the application's own sign-in, sign-out, error and verify-request
pages (AUTH_PAGES_*, or ``[auth.pages]``). Every redirect to one of those pages goes to the
application's, with Auth.js's query parameters; ours stay at their routes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, render_template_string
from flask.testing import FlaskClient

from webapp import create_app
from webapp.settings import ConfigError

from .support.config import TEST_SECRET
from .support.signin import demo_sign_in

OWN_PAGES = {
    "AUTH_PAGES_SIGNIN": "/login",
    "AUTH_PAGES_SIGNOUT": "/goodbye",
    # An absolute URL on AUTH_URL's origin, with a query of its own.
    "AUTH_PAGES_ERROR": "http://localhost/oops?from=auth",
    "AUTH_PAGES_VERIFY_REQUEST": "/check-your-mail",
}


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app(**OWN_PAGES)


def _csrf(client: FlaskClient) -> str:
    return str(client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]


def test_a_signed_out_browser_goes_to_the_own_sign_in_page(client: FlaskClient) -> None:
    answer = client.get("/account")
    assert answer.headers["Location"] == (
        "http://localhost/login?error=SessionRequired&callbackUrl=http%3A%2F%2Flocalhost%2Faccount"
    )


def test_sign_in_errors_go_to_the_own_sign_in_page(client: FlaskClient) -> None:
    wrong = demo_sign_in(client, password="wrong", callbackUrl="/account")
    assert wrong.headers["Location"] == (
        "http://localhost/login?error=CredentialsSignin&code=credentials&callbackUrl=%2Faccount"
    )
    unknown = client.post("/auth/signin/nope", data={"csrfToken": _csrf(client)})
    assert unknown.headers["Location"] == "http://localhost/login?error=Signin"
    forged = client.post("/auth/signout", data={})
    assert forged.headers["Location"] == "http://localhost/login?error=MissingCSRF"
    forwarded = client.get("/auth/error?error=OAuthSignin&callbackUrl=/account")
    assert forwarded.headers["Location"] == (
        "http://localhost/login?error=OAuthSignin&callbackUrl=%2Faccount"
    )


def test_an_auth_js_client_is_given_the_own_pages(client: FlaskClient) -> None:
    headers = {"X-Auth-Return-Redirect": "1"}
    unknown = client.post("/auth/signin/nope", data={"csrfToken": _csrf(client)}, headers=headers)
    assert unknown.json == {"url": "http://localhost/login?error=Signin"}
    missing = client.get("/auth/nothing-here", headers=headers)
    assert missing.json is not None
    assert missing.json["url"] == "http://localhost/oops?from=auth&error=NotFound"


def test_other_errors_go_to_the_own_error_page(client: FlaskClient) -> None:
    answer = client.get("/auth/callback/nope")
    assert answer.headers["Location"] == "http://localhost/oops?from=auth&error=Signin"


def test_an_email_sign_in_goes_to_the_own_verify_request_page(
    email_app: Callable[..., Flask],
) -> None:
    client = email_app(**OWN_PAGES).test_client()
    data = {"csrfToken": _csrf(client), "email": "ann@example.com"}
    answer = client.post("/auth/signin/email", data=data)
    assert answer.headers["Location"] == (
        "http://localhost/check-your-mail?provider=email&type=email"
    )


def test_the_pages_link_to_the_own_sign_out_page(app: Flask) -> None:
    with app.test_request_context("/"):
        link = render_template_string('{{ auth_page_url("signout", callbackUrl="/bye") }}')
    assert link == "/goodbye?callbackUrl=%2Fbye"


def test_our_pages_stay_at_their_routes(client: FlaskClient) -> None:
    for route in ("signin", "signout", "error", "verify-request"):
        assert client.get(f"/auth/{route}").status_code == 200, route


def test_without_the_setting_our_pages_are_used(make_app: Callable[..., Flask]) -> None:
    app = make_app()
    client = app.test_client()
    assert client.get("/account").headers["Location"] == (
        "http://localhost/auth/signin?error=SessionRequired"
        "&callbackUrl=http%3A%2F%2Flocalhost%2Faccount"
    )
    assert client.get("/auth/callback/nope").headers["Location"] == (
        "http://localhost/auth/error?error=Signin"
    )
    with app.test_request_context("/"):
        assert render_template_string('{{ auth_page_url("signout") }}') == "/auth/signout"


def test_the_toml_file_names_the_pages_and_the_environment_wins(
    tmp_path: Path, make_app: Callable[..., Flask]
) -> None:
    path = tmp_path / "auth.toml"
    path.write_text('[auth.pages]\nsignIn = "/toml-login"\nerror = "/toml-oops"\n')
    client = make_app(AUTH_CONFIG=str(path), AUTH_PAGES_ERROR="/env-oops").test_client()
    assert (
        client.get("/account")
        .headers["Location"]
        .startswith("http://localhost/toml-login?error=SessionRequired")
    )
    assert client.get("/auth/callback/nope").headers["Location"] == (
        "http://localhost/env-oops?error=Signin"
    )


def _start(**config: Any) -> Flask:
    return create_app(
        {
            "APP_ENV": "development",
            "AUTH_SECRET": TEST_SECRET,
            "AUTH_URL": "https://example.com/auth",
            "DATABASE_URL": "sqlite://",
            "TESTING": True,
            **config,
        },
        environ={},
    )


@pytest.mark.parametrize(
    "value",
    [
        "login",
        "//evil.example/login",
        "https://evil.example/login",
        "http://example.com/login",
        "https://example.com:8443/login",
        "https://ann@example.com/login",
        "javascript:alert(1)",
        "/log in",
        "/login#top",
        "/\\evil.example",
    ],
)
def test_a_page_elsewhere_stops_start_up_naming_the_setting(value: str) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^AUTH_PAGES_VERIFY_REQUEST \(\[auth.pages\] verifyRequest\) must be a path on",
    ) as info:
        _start(AUTH_PAGES_VERIFY_REQUEST=value)
    assert len(str(info.value).splitlines()) == 1


def test_an_unknown_toml_key_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "auth.toml"
    path.write_text('[auth.pages]\nsignin = "/login"\n')
    with pytest.raises(ConfigError, match=r"\[auth.pages\] has no key 'signin'; it takes signIn"):
        _start(AUTH_CONFIG=str(path))


def test_an_absolute_url_on_the_origin_is_kept_as_its_path() -> None:
    app = _start(AUTH_PAGES_SIGNIN="HTTPS://Example.com:443/login?next=1")
    with app.test_request_context("/"):
        link = app.jinja_env.globals["auth_page_url"]("signin", error="Signin")  # type: ignore[operator]
    assert link == "/login?next=1&error=Signin"
