"""The site's address comes from AUTH_URL only; forwarded headers only from trusted proxies.

An attacker controls every request header. Whatever ``Host``, ``X-Forwarded-Host``,
``X-Forwarded-Proto``, ``Forwarded`` or ``X-Forwarded-For`` say, no link, redirect, JSON
URL or e-mail may name another host than AUTH_URL's, a foreign host is refused with 400
before anything is written or sent, and a client cannot choose the address the throttles
count. Each rule runs with no proxy trusted, with a hop count and with proxy addresses.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp.core.hooks import AuthHooks, UserInfo
from webapp.core.proxies import ForwardedHeaders
from webapp.settings import ConfigError, TrustedProxies, load_settings
from webapp.storage.db import db
from webapp.storage.models import RateLimitCounter, Session, User, VerificationToken

from .support.mail import Mailbox, link_of
from .support.oauth import FakeIdP, fake_idp, query_of, write_providers_toml
from .support.rows import row_count

SITE = "app.example"
AUTH_URL = f"http://{SITE}/auth"
EVIL = "evil.example"
TRUST_MODES = {"none": "", "hops": "1", "addresses": "127.0.0.1/32,10.0.0.0/8"}
#: Header sets that leave the request's own Host alone (that one is its own case), and
#: whether a trusted proxy would be naming a foreign host with them (refused with 400).
FORGED_HEADERS = [
    ({"X-Forwarded-Host": EVIL}, True),
    # A client's value first, then the one our proxy appended: the proxy's counts.
    ({"X-Forwarded-Host": f"{EVIL}, {SITE}"}, False),
    ({"X-Forwarded-Proto": "https", "X-Forwarded-Host": f"{SITE}.{EVIL}"}, True),
    ({"Forwarded": f"for=6.6.6.6;host={EVIL};proto=https"}, False),
    ({"X-Forwarded-For": "6.6.6.6", "X-Forwarded-Proto": "javascript"}, False),
    ({"X-Forwarded-Host": f"{SITE}@{EVIL}"}, True),
]


@pytest.fixture(scope="module")
def idp() -> Iterator[FakeIdP]:
    """The OpenID Provider "fake", with sign-out at the provider and device sign-in."""
    with fake_idp() as provider:
        provider.discovery["end_session_endpoint"] = provider.issuer + "/logout"
        provider.discovery["device_authorization_endpoint"] = provider.issuer + "/device/code"
        device_code = {
            "device_code": "fake-device-code",
            "user_code": "WDJB-MJHT",
            "verification_uri": provider.issuer + "/device",
            "expires_in": 600,
        }
        provider.routes["/device/code"] = lambda request: (200, {}, device_code)
        yield provider


def _hooks() -> AuthHooks:
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form: Any) -> UserInfo | None:
        if form.get("password") != "right":
            return None
        return UserInfo(email=form["email"], subject=form["email"], email_verified=True)

    return hooks


@pytest.fixture
def production_app(
    make_app: Callable[..., Flask], mailbox: Mailbox, idp: FakeIdP, tmp_path: Any
) -> Callable[..., Flask]:
    """A production app at AUTH_URL with e-mail, OpenID Connect and credentials sign-in."""

    def factory(**overrides: Any) -> Flask:
        toml = write_providers_toml(
            tmp_path / "providers.toml",
            [
                idp.provider_config("fake", logout="rp-initiated", device_flow=True),
                {"id": "email", "type": "email"},
                {"id": "pw", "type": "credentials"},
            ],
        )
        settings = {
            "APP_ENV": "production",
            "AUTH_URL": AUTH_URL,
            "AUTH_CONFIG": str(toml),
            "EMAIL_SERVER": mailbox.url(),
            "EMAIL_TIMEOUT": "5",
        }
        return make_app(hooks=_hooks(), **{**settings, **overrides})

    return factory


class SiteClient(FlaskClient):
    """A browser on the site: every request goes to AUTH_URL's host unless told otherwise."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("base_url", f"http://{SITE}")
        return super().open(*args, **kwargs)


def _client(app: Flask) -> FlaskClient:
    app.test_client_class = SiteClient
    return app.test_client()


def _csrf(client: FlaskClient) -> str:
    return str(client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]


def _every_action(client: FlaskClient, headers: dict[str, str]) -> list[Any]:
    """Each route that builds a URL or sends mail, once, with ``headers`` added."""
    kw: dict[str, Any] = {"headers": headers}
    token = _csrf(client)
    return [
        client.get("/auth/providers", **kw),
        client.get("/auth/signin?callbackUrl=/after", **kw),
        client.post(
            "/auth/signin/email",
            data={"csrfToken": token, "email": "ann@example.com", "callbackUrl": "/after"},
            **kw,
        ),
        client.post("/auth/signin/fake", data={"csrfToken": token}, **kw),
        client.post(
            "/auth/callback/pw",
            data={"csrfToken": token, "email": "bob@example.com", "password": "right"},
            **kw,
        ),
        client.get("/auth/error?error=OAuthSignin&callbackUrl=/after", **kw),
        client.get("/auth/error?error=Verification", **kw),
        client.get("/account", **kw),
        client.post("/auth/signout", data={"csrfToken": token}, **kw),
        client.post("/auth/signout", data={}, **kw),  # no CSRF token: MissingCSRF redirect
        client.get("/auth/verify-request?provider=email&type=email", **kw),
        client.get("/auth/signout/callback?state=not-this-browsers", **kw),
        client.get("/auth/device?callbackUrl=/after", **kw),
        client.post("/auth/device/fake", data={"csrfToken": token, "callbackUrl": "/after"}, **kw),
        client.get("/auth/device/fake/status", **kw),
    ]


def _urls_in(response: Any) -> str:
    return response.headers.get("Location", "") + response.get_data(as_text=True)


@pytest.mark.parametrize("trust", TRUST_MODES)
@pytest.mark.parametrize(
    ("headers", "foreign"), FORGED_HEADERS, ids=[",".join(h) for h, _ in FORGED_HEADERS]
)
def test_no_url_names_another_host_whatever_the_headers_say(
    production_app: Callable[..., Flask],
    mailbox: Mailbox,
    idp: FakeIdP,
    trust: str,
    headers: dict[str, str],
    foreign: bool,
) -> None:
    app = production_app(AUTH_TRUSTED_PROXIES=TRUST_MODES[trust])
    client = _client(app)
    forwarded_host = foreign and trust != "none"
    if trust != "none":
        # Through our proxy, which appends the address it saw to what the client sent.
        sent = headers.get("X-Forwarded-For")
        headers = {**headers, "X-Forwarded-For": f"{sent}, 203.0.113.7" if sent else "203.0.113.7"}
    for response in _every_action(client, headers):
        if forwarded_host:
            # A trusted proxy named a host that is not ours: refused, whatever the route.
            assert response.status_code == 400, response.request.path
            continue
        assert response.status_code < 400 or response.status_code == 403, response.status
        text = _urls_in(response)
        assert EVIL not in text, (response.request.path, text[:300])
        location = response.headers.get("Location")
        if location:
            assert location.startswith((f"http://{SITE}/", idp.issuer + "/")), location
    if forwarded_host:
        assert mailbox.messages == []
    else:
        link = link_of(mailbox.last())
        assert link.startswith(f"http://{SITE}/auth/callback/email?"), link
        assert EVIL not in mailbox.last().as_string()


@pytest.mark.parametrize("trust", TRUST_MODES)
@pytest.mark.parametrize(
    "headers",
    [h for h, foreign in FORGED_HEADERS if not foreign],
    ids=[",".join(h) for h, foreign in FORGED_HEADERS if not foreign],
)
def test_sign_out_at_the_provider_comes_back_to_auth_url(
    production_app: Callable[..., Flask], idp: FakeIdP, trust: str, headers: dict[str, str]
) -> None:
    client = _client(production_app(AUTH_TRUSTED_PROXIES=TRUST_MODES[trust]))
    start = client.post("/auth/signin/fake", data={"csrfToken": _csrf(client)}, headers=headers)
    answer = requests.get(start.headers["Location"], allow_redirects=False, timeout=10)
    back = answer.headers["Location"]
    assert back.startswith(f"{AUTH_URL}/callback/fake?")
    client.get(back.removeprefix(f"http://{SITE}"), headers=headers)
    assert client.get("/auth/session").json is not None

    out = client.post(
        "/auth/signout", data={"csrfToken": _csrf(client), "callbackUrl": "/bye"}, headers=headers
    )
    assert out.headers["Location"].startswith(idp.issuer + "/logout?")
    sent = query_of(out.headers["Location"])
    assert sent["post_logout_redirect_uri"] == f"{AUTH_URL}/signout/callback"
    assert client.get("/auth/session").json is None
    returned = client.get(f"/auth/signout/callback?state={sent['state']}", headers=headers)
    assert returned.headers["Location"] == f"http://{SITE}/bye"


def test_the_oauth_redirect_uri_and_json_urls_are_auth_url_s(
    production_app: Callable[..., Flask], idp: FakeIdP
) -> None:
    client = _client(production_app(AUTH_TRUSTED_PROXIES="1"))
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "6.6.6.6"}
    providers = client.get("/auth/providers", headers=headers).json
    assert providers["fake"]["callbackUrl"] == f"{AUTH_URL}/callback/fake"
    assert providers["email"]["signinUrl"] == f"{AUTH_URL}/signin/email"
    start = client.post("/auth/signin/fake", data={"csrfToken": _csrf(client)}, headers=headers)
    assert query_of(start.headers["Location"])["redirect_uri"] == f"{AUTH_URL}/callback/fake"


@pytest.mark.parametrize("trust", TRUST_MODES)
@pytest.mark.parametrize(
    "host",
    [
        EVIL,
        f"{EVIL}:80",
        f"{SITE}.{EVIL}",
        "127.0.0.1",
        "localhost",
        f"{SITE}@{EVIL}",
        "[::1]:8000",
    ],
)
def test_a_foreign_host_is_refused_before_anything_is_written_or_sent(
    production_app: Callable[..., Flask], mailbox: Mailbox, trust: str, host: str
) -> None:
    app = production_app(AUTH_TRUSTED_PROXIES=TRUST_MODES[trust])
    client = _client(app)
    token = _csrf(client)
    form = {"csrfToken": token, "email": "ann@example.com"}
    for response in (
        client.post("/auth/signin/email", data=form, headers={"Host": host}),
        client.post(
            "/auth/callback/pw", data={**form, "password": "right"}, headers={"Host": host}
        ),
        client.get("/auth/signin", headers={"Host": host}),
        client.get("/auth/csrf", headers={"Host": host}),
    ):
        assert response.status_code == 400
        assert "Set-Cookie" not in response.headers
    page = client.get("/auth/signin", headers={"Host": host})
    assert f"<strong>{SITE}</strong>" in page.get_data(as_text=True)
    assert client.get("/auth/session", headers={"Host": host}).json == {
        "error": "UnknownHost",
        "expectedHost": SITE,
    }
    assert mailbox.messages == []
    assert row_count(app, VerificationToken) == 0
    assert row_count(app, User) == 0


@pytest.mark.parametrize("host", [SITE, f"{SITE}:8443", SITE.upper(), f"{SITE}."])
def test_auth_url_s_host_is_accepted_on_any_port(
    production_app: Callable[..., Flask], host: str
) -> None:
    client = production_app().test_client()
    assert client.get("/auth/session", headers={"Host": host}).status_code == 200


def test_allowed_hosts_are_accepted_but_links_still_name_auth_url(
    production_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = production_app(
        AUTH_ALLOWED_HOSTS="internal.example, 10.0.0.5", AUTH_TRUSTED_PROXIES="127.0.0.1"
    )
    client = _client(app)
    for headers in (
        {"Host": "internal.example"},
        {"X-Forwarded-Host": "internal.example"},
        {"Host": "10.0.0.5:8000"},
    ):
        token = client.get("/auth/csrf", headers=headers).json["csrfToken"]  # type: ignore[index]
        response = client.post(
            "/auth/signin/email",
            headers=headers,
            data={"csrfToken": token, "email": "ann@example.com"},
        )
        assert response.status_code == 302
        assert response.headers["Location"].startswith(f"{AUTH_URL}/verify-request")
    assert all(link_of(m).startswith(AUTH_URL + "/") for m in mailbox.messages)
    assert len(mailbox.messages) == 3


#: A sign-in with a query Auth.js clients send; the redirect keeps it as it was sent.
SIGNIN_WITH_QUERY = "/auth/callback/demo?callbackUrl=%2Fa%3Fb%3D1%26c%3D2&x=%C3%A9+y"


@pytest.mark.parametrize(
    ("auth_url", "others"),
    [
        (
            "http://localhost:5000/auth",
            ["127.0.0.1", "127.0.0.1:5000", "127.0.0.1:9999", "[::1]:5000"],
        ),
        ("http://127.0.0.1:5000/auth", ["localhost", "localhost:5000", "LOCALHOST.:9999", "[::1]"]),
    ],
)
def test_development_sends_the_other_loopback_names_to_auth_url_s_host(
    make_app: Callable[..., Flask], auth_url: str, others: list[str]
) -> None:
    """A form shown at one loopback name and posted to another fails its CSRF check (the
    cookie belongs to the first name), and htmx refuses the other name's URLs: so the other
    names are sent to AUTH_URL's host before any page, cookie or row, with a 307 built from
    AUTH_URL (never the request's host or port) that keeps method, path and query."""
    app = make_app(AUTH_URL=auth_url)
    client = app.test_client()
    own = auth_url.split("//")[1].split(":")[0]
    for port in ("5000", "5001"):
        assert client.get("/auth/session", headers={"Host": f"{own}:{port}"}).status_code == 200
    token = client.get("/auth/csrf", headers={"Host": f"{own}:5000"}).json["csrfToken"]  # type: ignore[index]
    form = {"csrfToken": token, "email": "ann@example.com", "password": "demo"}
    for host in others:
        for method in ("GET", "POST"):
            response = client.open(
                SIGNIN_WITH_QUERY, method=method, headers={"Host": host}, data=form
            )
            assert response.status_code == 307, (host, method)
            assert (
                response.headers["Location"] == auth_url.removesuffix("/auth") + SIGNIN_WITH_QUERY
            )
            assert response.headers["Cache-Control"] == "no-store"
            assert "Set-Cookie" not in response.headers
    assert row_count(app, Session) == 0 and row_count(app, User) == 0
    # The same form at AUTH_URL's host signs in: the redirect was the only obstacle.
    signed_in = client.post(SIGNIN_WITH_QUERY, headers={"Host": f"{own}:5000"}, data=form)
    assert signed_in.status_code == 302 and row_count(app, Session) == 1
    assert client.get("/auth/session", headers={"Host": EVIL}).status_code == 400


def test_development_serves_a_loopback_name_listed_in_allowed_hosts(
    make_app: Callable[..., Flask],
) -> None:
    client = make_app(AUTH_URL="http://localhost:5000/auth", AUTH_ALLOWED_HOSTS="127.0.0.1")
    response = client.test_client().get("/auth/providers", headers={"Host": "127.0.0.1:5000"})
    assert response.status_code == 200
    assert response.json["demo"]["signinUrl"] == "http://localhost:5000/auth/signin/demo"  # type: ignore[index]


def test_production_never_redirects_a_loopback_name(
    production_app: Callable[..., Flask],
) -> None:
    client = _client(production_app())
    for host in ("localhost", "127.0.0.1:8000"):
        response = client.get("/auth/signin", headers={"Host": host})
        assert response.status_code == 400 and "Location" not in response.headers


def test_without_auth_url_links_follow_loopback_or_allowed_hosts_only(
    make_app: Callable[..., Flask],
) -> None:
    app = make_app(AUTH_URL="", AUTH_ALLOWED_HOSTS="dev.example", AUTH_TRUSTED_PROXIES="1")
    client = app.test_client()

    def signin_url(**headers: str) -> str:
        body = client.get("/auth/providers", headers=headers).json
        return str(body["email"]["signinUrl"])

    # No AUTH_URL and no `flask run` port (another server): every loopback name is served
    # where it is named, and links follow it.
    assert signin_url(Host="localhost:5001") == "http://localhost:5001/auth/signin/email"
    assert signin_url(Host="127.0.0.1:8000") == "http://127.0.0.1:8000/auth/signin/email"
    proxied = signin_url(
        Host="localhost:5001", **{"X-Forwarded-Host": "dev.example", "X-Forwarded-For": "10.1.1.1"}
    )
    assert proxied == "http://dev.example/auth/signin/email"
    refused = client.get(
        "/auth/providers",
        headers={"Host": "localhost:5001", "X-Forwarded-Host": EVIL, "X-Forwarded-For": "10.1.1.1"},
    )
    assert refused.status_code == 400


def test_a_cross_origin_post_with_a_valid_token_is_refused(
    production_app: Callable[..., Flask],
) -> None:
    client = _client(production_app())
    client.post(
        "/auth/callback/pw",
        data={"csrfToken": _csrf(client), "email": "c@example.com", "password": "right"},
    )
    assert client.get("/auth/session").json is not None
    token = _csrf(client)
    for headers in (
        {"Origin": f"http://{EVIL}"},
        {"Referer": f"http://{EVIL}/page"},
        {"Origin": f"https://{SITE}"},
    ):
        response = client.post("/auth/signout", data={"csrfToken": token}, headers=headers)
        assert query_of(response.headers["Location"])["error"] == "MissingCSRF"
        assert client.get("/auth/session").json is not None
    same_site = client.post(
        "/auth/signout",
        data={"csrfToken": token},
        headers={"Origin": f"http://{SITE}", "Referer": f"http://{SITE}/"},
    )
    assert same_site.headers["Location"] == f"http://{SITE}/"
    assert client.get("/auth/session").json is None


# -- the client's address --------------------------------------------------------------


def _echo(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    host = environ.get("webapp.forwarded_host", "-")
    return [f"{environ['REMOTE_ADDR']} {environ['wsgi.url_scheme']} {host}".encode()]


def _seen(trusted: TrustedProxies, peer: str, headers: dict[str, str]) -> str:
    environ = {"REMOTE_ADDR": peer, "wsgi.url_scheme": "http"}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    return b"".join(ForwardedHeaders(_echo, trusted)(environ, lambda *a: None)).decode()


NETS = load_settings(
    {
        "APP_ENV": "development",
        "AUTH_SECRET": "s" * 40,
        "AUTH_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8, fd00::/8",
    },
    instance_path="/tmp",
).trusted_proxies


@pytest.mark.parametrize(
    ("trusted", "peer", "headers", "seen"),
    [
        # No proxy trusted: the headers are ignored entirely.
        (
            TrustedProxies(),
            "203.0.113.7",
            {"X-Forwarded-For": "1.1.1.1", "X-Forwarded-Proto": "https"},
            "203.0.113.7 http -",
        ),
        # One hop: the entry the proxy appended, whatever the client put before it.
        (
            TrustedProxies(hops=1),
            "127.0.0.1",
            {
                "X-Forwarded-For": "6.6.6.6, 203.0.113.7",
                "X-Forwarded-Proto": "https",
                "X-Forwarded-Host": SITE,
            },
            f"203.0.113.7 https {SITE}",
        ),
        # One hop, but the request did not come through it: nothing believed.
        (
            TrustedProxies(hops=1),
            "203.0.113.7",
            {"X-Forwarded-Proto": "https"},
            "203.0.113.7 http -",
        ),
        (
            TrustedProxies(hops=2),
            "127.0.0.1",
            {"X-Forwarded-For": "203.0.113.7, 10.0.0.2", "X-Forwarded-Proto": "https, http"},
            "203.0.113.7 https -",
        ),
        # Addresses: an untrusted peer is never believed, whatever it sends.
        (
            NETS,
            "203.0.113.7",
            {"X-Forwarded-For": "10.0.0.1", "X-Forwarded-Proto": "https", "X-Forwarded-Host": EVIL},
            "203.0.113.7 http -",
        ),
        # Trusted hops are skipped from the right; the first other entry is the client.
        (
            NETS,
            "127.0.0.1",
            {"X-Forwarded-For": "6.6.6.6, 203.0.113.7, 10.0.0.2"},
            "203.0.113.7 http -",
        ),
        (NETS, "127.0.0.1", {"X-Forwarded-For": "2001:db8::1, fd00::2"}, "2001:db8::1 http -"),
        (NETS, "127.0.0.1", {"X-Forwarded-For": "[2001:db8::1]:4711"}, "2001:db8::1 http -"),
        # Garbage where a trusted proxy would have written an address: stop at the proxy.
        (NETS, "127.0.0.1", {"X-Forwarded-For": "6.6.6.6, not-an-ip"}, "127.0.0.1 http -"),
        (NETS, "127.0.0.1", {"X-Forwarded-Proto": "https"}, "127.0.0.1 https -"),
    ],
)
def test_forwarded_headers_are_believed_only_from_trusted_hops(
    trusted: TrustedProxies, peer: str, headers: dict[str, str], seen: str
) -> None:
    assert _seen(trusted, peer, headers) == seen


@pytest.mark.parametrize("trust", ["none", "addresses"])
def test_forged_x_forwarded_for_does_not_escape_the_per_ip_throttle(
    production_app: Callable[..., Flask], mailbox: Mailbox, trust: str
) -> None:
    app = production_app(
        AUTH_TRUSTED_PROXIES=TRUST_MODES[trust],
        EMAIL_IP_LIMIT="3/10m",
        EMAIL_ADDRESS_LIMIT="100/10m",
    )
    client = _client(app)
    # Without trust the attacker connects directly; with it, through our proxy at 127.0.0.1,
    # which appends the address it saw after whatever the attacker sent.
    peer = "203.0.113.7" if trust == "none" else "127.0.0.1"
    token = _csrf(client)
    for n in range(8):
        forged = f"198.51.100.{n}, 192.0.2.{n}"
        xff = forged if trust == "none" else f"{forged}, 203.0.113.7"
        client.post(
            "/auth/signin/email",
            data={"csrfToken": token, "email": f"u{n}@example.com"},
            headers={"X-Forwarded-For": xff},
            environ_overrides={"REMOTE_ADDR": peer},
        )
    assert len(mailbox.messages) == 3
    with app.app_context():
        keys = set(db.session.scalars(sa.select(RateLimitCounter.key)))
    assert any("203.0.113.7" in k for k in keys), keys
    assert not any(re.search(r"198\.51|192\.0\.2", k) for k in keys), keys


def test_sessions_record_the_client_not_the_proxy(production_app: Callable[..., Flask]) -> None:
    app = production_app(AUTH_TRUSTED_PROXIES="127.0.0.1")
    client = _client(app)
    client.post(
        "/auth/callback/pw",
        data={"csrfToken": _csrf(client), "email": "d@example.com", "password": "right"},
        headers={"X-Forwarded-For": "6.6.6.6, 203.0.113.9"},
    )
    with app.app_context():
        assert [s.ip for s in db.session.query(Session)] == ["203.0.113.9"]


# -- configuration ---------------------------------------------------------------------


def _settings(**env: str) -> Any:
    return load_settings(
        {
            "APP_ENV": "production",
            "AUTH_SECRET": "s" * 40,
            "AUTH_URL": AUTH_URL,
            "DATABASE_URL": "postgresql://app@db.example/app",
            **env,
        },
        instance_path="/tmp",
    )


def test_trusted_proxy_settings() -> None:
    assert not _settings().trusted_proxies
    assert _settings(AUTH_TRUST_HOST="true").trusted_proxies == TrustedProxies(hops=1)
    assert _settings(AUTH_TRUSTED_PROXIES="2", AUTH_TRUST_HOST="true").trusted_proxies.hops == 2
    nets = _settings(AUTH_TRUSTED_PROXIES="127.0.0.1/32, 10.0.0.0/8 ,::1").trusted_proxies
    assert [str(n) for n in nets.networks] == ["127.0.0.1/32", "10.0.0.0/8", "::1/128"]
    assert _settings(AUTH_ALLOWED_HOSTS="A.example., [::1]").allowed_hosts == ("a.example", "::1")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTH_TRUSTED_PROXIES", "proxy.example"),
        ("AUTH_TRUSTED_PROXIES", "11"),
        ("AUTH_TRUSTED_PROXIES", "10.0.0.0/33"),
        ("AUTH_ALLOWED_HOSTS", "https://a.example"),
        ("AUTH_ALLOWED_HOSTS", "a.example:8000"),
        ("AUTH_TRUST_HOST", "maybe"),
    ],
)
def test_bad_trust_settings_stop_start_up_naming_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        _settings(**{name: value})


def test_start_up_logs_what_is_trusted(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="webapp"):
        make_app(AUTH_TRUSTED_PROXIES="10.0.0.0/8", AUTH_ALLOWED_HOSTS="internal.example")
    assert "trusting proxies at 10.0.0.0/8; also answering to internal.example" in caplog.text


@pytest.mark.parametrize("trust", ["none", "addresses"])
def test_every_route_refuses_a_foreign_host(
    production_app: Callable[..., Flask], mailbox: Mailbox, trust: str
) -> None:
    app = production_app(AUTH_TRUSTED_PROXIES=TRUST_MODES[trust])
    client = _client(app)
    hostile = [{"Host": EVIL}, {"Host": f"{EVIL}:443", "X-Forwarded-For": "6.6.6.6"}]
    if trust != "none":
        hostile.append({"X-Forwarded-Host": EVIL, "X-Forwarded-For": "6.6.6.6"})
    rules = [r for r in app.url_map.iter_rules() if "<path:filename>" not in r.rule]
    assert len(rules) > 15
    for rule in rules:
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "1" if "int" in m[0] else "email", rule.rule)
        for method in sorted((rule.methods or set()) & {"GET", "POST"}):
            for headers in hostile:
                response = client.open(
                    path, method=method, headers=headers, data={"email": "ann@example.com"}
                )
                assert response.status_code == 400, (method, path, headers)
                assert "Set-Cookie" not in response.headers
    assert mailbox.messages == []


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/auth/session", {}),
        ("GET", "/auth/csrf", {}),
        ("GET", "/auth/providers", {}),
        ("GET", "/auth/token/fake", {}),
        ("GET", "/auth/webauthn-options/passkey", {}),
        ("POST", "/auth/_log", {"Content-Type": "application/json"}),
        ("GET", "/account/api", {}),
        ("POST", "/account/api/sessions/end-others", {}),
        ("GET", "/auth/signin", {"Accept": "application/json"}),
        ("POST", "/auth/signin/email", {"X-Auth-Return-Redirect": "1"}),
    ],
)
def test_a_foreign_host_answers_json_to_json_callers(
    production_app: Callable[..., Flask],
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    """Whatever a JSON caller asks, the answer names AUTH_URL's host, as JSON (the same
    rule as every error answer, webapp.web.error_answers.expects_json), and the log line its id."""
    client = _client(production_app())
    with caplog.at_level(logging.WARNING, logger="webapp.core.hosts"):
        response = client.open(path, method=method, headers={"Host": f"{EVIL}:8443", **headers})
    assert response.status_code == 400
    assert response.json == {"error": "UnknownHost", "expectedHost": SITE}
    assert response.headers["Cache-Control"] == "no-store"
    [record] = [r for r in caplog.records if r.name == "webapp.core.hosts"]
    assert record.request_id == response.headers["X-Request-ID"]  # type: ignore[attr-defined]
    assert (
        record.getMessage() == f"refused request for foreign host {EVIL}:8443 (this site is {SITE})"
    )


@pytest.mark.parametrize(
    "path", ["/", "/auth/signin?callbackUrl=/after", "/account", "/auth/error"]
)
def test_a_foreign_host_shows_a_browser_a_page_naming_auth_url_s_host(
    production_app: Callable[..., Flask], path: str
) -> None:
    client = _client(production_app())
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8", "Host": f"{EVIL}:8443"}
    response = client.get(path, headers=browser)
    assert response.status_code == 400 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert f"<strong>{SITE}</strong>" in page
    # Nothing on the page comes from the request's host: no link there, no echo of it.
    assert EVIL not in page and ":8443" not in page


def test_a_request_naming_no_host_is_refused(production_app: Callable[..., Flask]) -> None:
    client = production_app().test_client()
    response = client.get("/auth/session", environ_overrides={"HTTP_HOST": ""})
    assert response.status_code == 400
    assert response.headers["Cache-Control"] == "no-store"
