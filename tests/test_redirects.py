"""Safe redirects: callbackUrl is followed only on our own origin (CVE-2021-32618 class)."""

from __future__ import annotations

import pytest

from webapp.core.redirects import safe_callback_url

HOSTILE = [
    "//evil.example",
    "//evil.example/path",
    "///evil.example",
    "////evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "/%5Cevil.example",
    "/%5cevil.example",
    "%2F%2Fevil.example",
    "/%2F%2Fevil.example",
    "/%2f/evil.example",
    "/%252F%252Fevil.example",
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "https:evil.example",
    "http:evil.example",
    "https:/evil.example",
    "https://evil.example",
    "http://evil.example/",
    "https://localhost.evil.example/",
    "https://evil.example/http://localhost/",
    "http://localhost@evil.example/",
    "http://localhost:80@evil.example/",
    "http://user:pass@localhost/",
    "http://evil.example\\@localhost/",
    "http://evil.example%2F@localhost/",
    "ht\ttp://evil.example",
    "h\nttp://evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/\r\n/evil.example",
    "\x00//evil.example",
    "http://localhost:8080/",
    "https://localhost/",
    "ftp://localhost/",
    "relative/path",
    "evil.example",
    "?next=//evil.example",
    "http://[::1]/",
    "http://localhost./%2F%2Fevil.example" + "x" * 2100,
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_callback_urls_fall_back_to_the_origin(app, value):
    with app.test_request_context():
        assert safe_callback_url(value) == "http://localhost/"


@pytest.mark.parametrize(
    "value,expected",
    [
        ("/", "http://localhost/"),
        ("/account", "http://localhost/account"),
        ("/account?tab=sessions#top", "http://localhost/account?tab=sessions#top"),
        ("/a%20b", "http://localhost/a%20b"),
        ("/caf\u00e9", "http://localhost/caf%C3%A9"),
        ("http://localhost/account", "http://localhost/account"),
        ("http://LOCALHOST:80/x?y=1", "http://localhost/x?y=1"),
        ("http://localhost", "http://localhost/"),
    ],
)
def test_same_origin_values_are_kept(app, value, expected):
    with app.test_request_context():
        assert safe_callback_url(value) == expected


@pytest.mark.parametrize("value", [None, ""])
def test_missing_value_goes_to_the_origin(app, value):
    with app.test_request_context():
        assert safe_callback_url(value) == "http://localhost/"


@pytest.mark.parametrize("value", ["//evil.example", "/\\evil.example", "https://evil.example"])
def test_signin_and_signout_never_redirect_off_site(client, auth, value):
    r = auth.signin(callbackUrl=value)
    assert r.headers["Location"] == "http://localhost/"
    r = auth.signout(callbackUrl=value)
    assert r.headers["Location"] == "http://localhost/"


def test_the_host_header_cannot_steer_redirects(app):
    with app.test_request_context(headers={"Host": "evil.example"}):
        assert safe_callback_url("http://evil.example/x") == "http://localhost/"
        assert safe_callback_url("/x") == "http://localhost/x"


def test_a_trusted_proxy_cannot_change_the_origin(make_app):
    # AUTH_TRUST_HOST once made links follow X-Forwarded-Host (an account takeover through
    # a forged sign-in link); now it only lets a proxy name the client and the scheme.
    app = make_app(AUTH_TRUST_HOST="true")
    headers = {
        "X-Forwarded-Host": "localhost",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-For": "203.0.113.7",
        "Host": "127.0.0.1:8000",
    }
    providers = app.test_client().get("/auth/providers", headers=headers).json
    assert providers["demo"]["signinUrl"] == "http://localhost/auth/signin/demo"


def test_redirect_hook_decides_after_the_safety_check(make_app):
    from webapp.core.hooks import AuthHooks

    hooks = AuthHooks()
    seen = []

    @hooks.on_redirect
    def redirect(url, base_url):
        seen.append((url, base_url))
        return base_url + "/welcome"

    client = make_app(hooks=hooks).test_client()
    token = client.get("/auth/csrf").json["csrfToken"]
    r = client.post("/auth/signout", data={"csrfToken": token, "callbackUrl": "//evil.example"})
    assert r.headers["Location"] == "http://localhost/welcome"
    assert seen == [("http://localhost/", "http://localhost")]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "state=",
        "state=%00",
        "state=" + "a" * 10000,
        "state=x%0d%0aLocation:%20https://evil.example",
        "state=%ff%fe%fd",
        "state=a&state=b",
    ],
)
def test_a_hostile_sign_out_return_lands_on_the_site(client, query):
    # No sign-out at a provider started in this browser: whatever comes back lands home.
    cookie = "auth.signout-state"
    client.set_cookie(cookie, "%00" + "b" * 4000)
    r = client.get("/auth/signout/callback?" + query)
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/"
    assert "no-store" in r.headers["Cache-Control"]
