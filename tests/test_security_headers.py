"""Security headers: no-store on personal answers, HSTS on an https AUTH_URL."""

from __future__ import annotations

import pytest

from webapp.settings import ConfigError, load_settings

from .support.signin import demo_sign_in

HTMX = {"HX-Request": "true"}
PRIVATE = "private, no-cache, no-store"
HTTPS = "https://localhost"


def is_no_store(response) -> bool:
    return "no-store" in response.headers.get("Cache-Control", "")


def a_static_file(client) -> str:
    html = client.get("/").get_data(as_text=True)
    start = html.index('src="/static/dist/') + len('src="')
    return html[start : html.index('"', start)]


# -- no-store ----------------------------------------------------------------------------


def test_signed_in_pages_are_not_stored(client, auth):
    auth.signin()
    for path in ("/", "/account"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers["Cache-Control"] == PRIVATE, path
        assert r.headers["Pragma"] == "no-cache", path
        assert r.headers["Expires"] == "0", path


def test_htmx_fragments_are_not_stored(app, client, auth):
    auth.signin()
    r = client.post("/account/sessions/end-others", data={"csrfToken": auth.csrf()}, headers=HTMX)
    assert r.status_code == 200 and "Signed out 0 other sessions." in r.get_data(as_text=True)
    assert r.headers["Cache-Control"] == PRIVATE


def test_the_signed_out_home_page_may_be_cached(client):
    r = client.get("/")
    assert r.status_code == 200 and not is_no_store(r)
    assert "Pragma" not in r.headers


def test_the_account_area_is_never_stored_even_signed_out(client):
    r = client.get("/account")
    assert r.status_code == 302
    assert r.headers["Cache-Control"] == PRIVATE


def test_an_answer_that_clears_the_session_cookie_is_not_stored(client):
    client.set_cookie("auth.session-token", "not-a-real-token")
    r = client.get("/")
    assert any("Max-Age=0" in h for h in r.headers.getlist("Set-Cookie"))
    assert r.headers["Cache-Control"] == PRIVATE


def test_static_files_keep_their_cache_headers(client, auth):
    auth.signin()
    with client.get(a_static_file(client)) as r:
        assert r.status_code == 200
        assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert "Pragma" not in r.headers
    with client.get("/static/favicon.svg") as r:
        assert r.status_code == 200 and not is_no_store(r)


def test_no_store_is_not_added_twice(client, auth):
    # The auth routes and the account JSON are personal whether or not a session is read.
    auth.signin()
    r = client.get("/auth/session")
    assert r.headers.getlist("Cache-Control") == ["private, no-cache, no-store"]
    r = client.get("/account/api")
    assert r.headers.getlist("Cache-Control") == ["private, no-cache, no-store"]


def test_an_auth_answer_refused_before_its_view_is_not_stored(client):
    # The CSRF check runs before the auth routes' own code: its refusal is personal too.
    r = client.post("/auth/signin/email", data={"email": "ann@example.com"})
    assert r.status_code == 302 and "MissingCSRF" in r.headers["Location"]
    assert r.headers.getlist("Cache-Control") == [PRIVATE]
    assert r.headers["Expires"] == "0"


# -- HSTS --------------------------------------------------------------------------------


def https_client(make_app, **settings):
    return make_app(AUTH_URL="https://localhost/auth", **settings).test_client()


def test_hsts_on_every_answer_with_an_https_auth_url(make_app):
    client = https_client(make_app)
    signed_out = client.get("/", base_url=HTTPS)
    static = client.get("/static/favicon.svg", base_url=HTTPS)
    static.close()
    for r in (signed_out, static, client.get("/auth/csrf", base_url=HTTPS)):
        assert r.headers["Strict-Transport-Security"] == "max-age=31536000"


def test_hsts_also_on_signed_in_pages_with_secure_cookies(make_app):
    client = https_client(make_app)
    r = demo_sign_in(client, base_url=HTTPS, headers={"Referer": "https://localhost/auth/signin"})
    assert any(
        h.startswith("__Secure-auth.session-token=") for h in r.headers.getlist("Set-Cookie")
    )
    r = client.get("/account", base_url=HTTPS)
    assert r.status_code == 200
    assert r.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert r.headers["Cache-Control"] == PRIVATE


def test_no_hsts_on_http(client):
    assert "Strict-Transport-Security" not in client.get("/").headers


@pytest.mark.parametrize(
    "settings,expected",
    [
        ({"AUTH_HSTS_INCLUDE_SUBDOMAINS": "true"}, "max-age=31536000; includeSubDomains"),
        ({"AUTH_HSTS_MAX_AGE": "600"}, "max-age=600"),
        ({"AUTH_HSTS_MAX_AGE": "0", "AUTH_HSTS_INCLUDE_SUBDOMAINS": "true"}, None),
    ],
)
def test_hsts_settings(make_app, settings, expected):
    r = https_client(make_app, **settings).get("/", base_url=HTTPS)
    assert r.headers.get("Strict-Transport-Security") == expected


def test_hsts_settings_from_the_toml_file(tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text("[auth]\nhsts_max_age = 86400\nhsts_include_subdomains = true\n")
    conf = load_settings(
        {"APP_ENV": "development", "AUTH_CONFIG": str(path)}, instance_path=tmp_path
    )
    assert (conf.hsts_max_age, conf.hsts_include_subdomains) == (86400, True)
    defaults = load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    assert (defaults.hsts_max_age, defaults.hsts_include_subdomains) == (31536000, False)


@pytest.mark.parametrize(
    "name,value",
    [
        ("AUTH_HSTS_MAX_AGE", "-1"),
        ("AUTH_HSTS_MAX_AGE", "1y"),
        ("AUTH_HSTS_INCLUDE_SUBDOMAINS", "sometimes"),
    ],
)
def test_bad_hsts_settings_name_the_setting(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings(
            {"APP_ENV": "development", name: value}, instance_path="/tmp/webapp-test-instance"
        )


# -- the fixed headers, spelled out (not compared with the constant that sets them) -------


@pytest.mark.parametrize(
    "path", ["/", "/auth/signin", "/auth/session", "/auth/error?error=Verification", "/nope"]
)
def test_no_page_can_be_framed_sniffed_or_given_scripts_from_elsewhere(client, path):
    r = client.get(path)
    policy = {
        directive.split(" ", 1)[0]: directive.split(" ", 1)[1]
        for directive in r.headers["Content-Security-Policy"].split("; ")
    }
    assert policy["frame-ancestors"] == "'none'"  # clickjacking
    assert policy["script-src"] == "'self'" and policy["object-src"] == "'none'"
    assert policy["base-uri"] == "'none'"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
