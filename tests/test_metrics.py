"""``GET /metrics`` (webapp/metrics/, webapp/web/metrics/): who may read it, and that each
family counts what it says, read back through the route as Prometheus would.

The counts live in the test process for the whole session (as they do in a worker), so
every test compares the counts after its action with those before (``Counts``). The
production server's several workers, and a real Prometheus reading them, are
tests/test_prometheus.py's.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from webapp.metrics import exposition, families
from webapp.settings import ConfigError, load_settings

from .support.audit import WRONG_PASSWORD, sign_in
from .support.config import TEST_SECRET
from .support.mail import EmailActions, Mailbox, link_of
from .support.oauth import Browser, FakeIdP, error_of, fake_idp
from .support.rows import NewSession
from .support.second_factor import enrol_authenticator, submit_second_factor, totp_code
from .support.servers import free_port
from .support.signin import demo_sign_in

TOKEN = "metrics-" + "m" * 40
SCRAPER = {"Authorization": f"Bearer {TOKEN}"}
ANN = "ann@example.com"
Sample = tuple[str, frozenset[tuple[str, str]]]


def scrape(client: FlaskClient) -> dict[Sample, float]:
    """Every sample ``GET /metrics`` shows, by name and labels."""
    answer = client.get("/metrics", headers=SCRAPER)
    assert answer.status_code == 200, answer.status_code
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.get_data(as_text=True))
        for sample in family.samples
    }


class Counts:
    """The samples before an action; ``added(name, **labels)`` says by how much the action
    moved one (read anew through the route each time)."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.before = scrape(client)

    def added(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return scrape(self.client).get(key, 0.0) - self.before.get(key, 0.0)


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    """The development app (the demo credentials) with the metrics served."""
    return make_app(AUTH_METRICS_TOKEN=TOKEN)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


# -- who may read it -------------------------------------------------------------------


def test_without_its_token_the_route_is_not_there(make_app: Callable[..., Flask]) -> None:
    client = make_app().test_client()
    unknown = client.get("/no-such-page")
    for headers in ({}, SCRAPER):
        answer = client.get("/metrics", headers=headers)
        assert answer.status_code == 404
        # The same page as any unknown path's, but for its request id.
        assert _without_ids(answer.get_data()) == _without_ids(unknown.get_data())
        assert answer.headers["Content-Type"] == unknown.headers["Content-Type"]
        assert "WWW-Authenticate" not in answer.headers


def _without_ids(page: bytes) -> bytes:
    return re.sub(rb"[0-9a-f]{32}", b"<id>", page)


def test_a_scraper_without_the_token_is_refused(client: FlaskClient) -> None:
    for authorization in (
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"Basic {TOKEN}",
        TOKEN,
    ):
        headers = {} if authorization is None else {"Authorization": authorization}
        answer = client.get("/metrics", headers=headers)
        assert answer.status_code == 401, authorization
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert answer.headers["Cache-Control"] == "no-store"
        assert b"auth_" not in answer.get_data()


def test_the_token_reads_every_metric_in_the_text_format(client: FlaskClient) -> None:
    for authorization in (f"Bearer {TOKEN}", f"bearer  {TOKEN} "):
        answer = client.get("/metrics", headers={"Authorization": authorization})
        assert answer.status_code == 200
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert answer.headers["Cache-Control"] == "no-store"
        assert "Set-Cookie" not in answer.headers
    described = {
        family.name for family in text_string_to_metric_families(answer.get_data(as_text=True))
    }
    # The parser names a counter's family without its ``_total``.
    assert {name.removesuffix("_total") for name in families.NAMES} <= described
    # A POST is no scrape (and needs no CSRF token to be refused).
    assert client.post("/metrics", headers=SCRAPER).status_code == 405


def test_the_token_is_a_checked_setting(tmp_path: Path) -> None:
    base = {"APP_ENV": "production", "AUTH_SECRET": TEST_SECRET, "AUTH_URL": "https://e.x/auth"}
    base["DATABASE_URL"] = "sqlite:///" + str(tmp_path / "db.sqlite3")
    assert load_settings({**base}).metrics_token is None
    assert load_settings({**base, "AUTH_METRICS_TOKEN": TOKEN}).metrics_token == TOKEN
    config = tmp_path / "auth.toml"
    config.write_text(f'[auth]\nmetrics_token = "{TOKEN}"\n')
    assert load_settings({**base, "AUTH_CONFIG": str(config)}).metrics_token == TOKEN
    for bad in ("short-" + "s" * 20, "with a space " + "s" * 30, "é" * 40):
        with pytest.raises(ConfigError) as refused:
            load_settings({**base, "AUTH_METRICS_TOKEN": bad})
        message = str(refused.value)
        assert message.startswith("AUTH_METRICS_TOKEN must") and "\n" not in message
        assert bad not in message
    assert TOKEN not in repr(load_settings({**base, "AUTH_METRICS_TOKEN": TOKEN}))


def test_the_token_is_never_logged(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("webapp.access").setLevel(logging.DEBUG)
    try:
        client = make_app(AUTH_METRICS_TOKEN=TOKEN).test_client()
        client.get("/metrics", headers=SCRAPER)
        client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}-wrong"})
        client.get(f"/metrics?token={TOKEN}", headers={"Authorization": f"Bearer {TOKEN}"})
    finally:
        logging.getLogger("webapp.access").setLevel(logging.WARNING)
    assert "/metrics" in caplog.text  # the access lines were written (at DEBUG)
    assert TOKEN not in caplog.text


# -- sign-ins, sessions, second factors, throttles ---------------------------------------


def test_demo_sign_ins_and_their_sessions_are_counted(client: FlaskClient) -> None:
    counts = Counts(client)
    demo = {"provider": "demo", "method": "credentials"}
    assert demo_sign_in(client, ANN, "wrong").status_code == 302
    assert counts.added(
        "auth_signins_total", **demo, outcome="failure", error="CredentialsSignin"
    ) == (1)
    assert demo_sign_in(client, ANN).headers["Location"] == "http://localhost/"
    assert demo_sign_in(client, ANN).headers["Location"] == "http://localhost/"
    assert counts.added("auth_signins_total", **demo, outcome="success", error="") == 2
    assert counts.added("auth_sessions_created_total") == 2
    # The second sign-in in this browser ended the first's session.
    assert counts.added("auth_sessions_ended_total", reason="replaced") == 1
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    assert client.post("/auth/signout", data={"csrfToken": csrf}).status_code == 302
    assert counts.added("auth_sessions_ended_total", reason="signout") == 1


def test_a_session_found_expired_is_counted_as_ended(
    app: Flask,
    client: FlaskClient,
    user_factory: Callable[..., int],
    session_factory: Callable[..., NewSession],
) -> None:
    counts = Counts(client)
    past = datetime.now(UTC) - timedelta(minutes=1)
    old = session_factory(app, user_factory(app), expires=past)
    client.set_cookie("auth.session-token", old.token)
    assert client.get("/auth/session").json is None
    assert counts.added("auth_sessions_ended_total", reason="expired") == 1


def test_e_mail_sign_ins_and_sends_are_counted(
    email_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    client = email_app(AUTH_METRICS_TOKEN=TOKEN).test_client()
    counts = Counts(client)
    actions = EmailActions(client)
    email = {"provider": "email", "method": "email"}
    assert actions.request_link(ANN).status_code == 302
    assert counts.added("auth_emails_total", message="signin", outcome="sent") == 1
    assert counts.added("auth_email_send_duration_seconds_count", outcome="sent") == 1
    assert error_of(actions.confirm(link_of(mailbox.last()))) is None
    assert counts.added("auth_signins_total", **email, outcome="success", error="") == 1
    # The link again: spent, refused (an e-mail refusal is a failed sign-in).
    assert actions.post_link(link_of(mailbox.last())).status_code == 302
    assert counts.added("auth_signins_total", **email, outcome="failure", error="Verification") == (
        1
    )
    # The mail server refuses: the send failed, and so did the sign-in.
    mailbox.rcpt_reply = "550 no such user"
    assert error_of(actions.request_link("bob@example.com")) == "EmailSignin"
    assert counts.added("auth_emails_total", message="signin", outcome="failed") == 1
    assert counts.added("auth_email_send_duration_seconds_count", outcome="failed") == 1
    assert counts.added("auth_signins_total", **email, outcome="failure", error="EmailSignin") == (
        1
    )


def test_credentials_throttles_count_every_refusal(password_app: Callable[..., Flask]) -> None:
    app = password_app(AUTH_METRICS_TOKEN=TOKEN, AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT="1/15m")
    client = app.test_client()
    counts = Counts(client)
    password = {"provider": "password", "method": "credentials"}
    for _ in range(3):
        assert error_of(sign_in(client, ANN, WRONG_PASSWORD)) == "CredentialsSignin"
    # The first attempt was tried and refused; the next two never reached the hook. The
    # trail keeps one row of the throttle; the metric counts both refusals.
    assert counts.added("auth_throttled_total", throttle="credentials-id-ip") == 2
    assert counts.added(
        "auth_signins_total", **password, outcome="failure", error="CredentialsSignin"
    ) == (1)


def test_second_factors_are_counted(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app(AUTH_METRICS_TOKEN=TOKEN, AUTH_SECOND_FACTOR_LIMIT="2/15m")
    client = app.test_client()
    # The limit counts in fixed 15-minute windows from the epoch: the codes are sent just
    # after the current window opened, so that no boundary falls between the wrong ones.
    window = 15 * 60
    opened = datetime.fromtimestamp(datetime.now(UTC).timestamp() // window * window, UTC)
    with freeze_time(opened - timedelta(seconds=90)):
        assert error_of(sign_in(client, ANN)) is None
        key, _ = enrol_authenticator(client)
    with freeze_time(opened + timedelta(seconds=1), tick=True):
        counts = Counts(client)
        browser = app.test_client()
        held = sign_in(browser, ANN)
        assert held.headers["Location"] == "http://localhost/auth/second-factor"
        password = {"provider": "password", "method": "credentials"}
        # Held for its second factor: no sign-in yet.
        assert counts.added("auth_signins_total", **password, outcome="success", error="") == 0
        assert submit_second_factor(browser, "000000").status_code == 400
        assert counts.added("auth_second_factor_total", factor="code", outcome="failure") == 1
        assert submit_second_factor(browser, totp_code(key)).status_code == 302
        assert counts.added("auth_second_factor_total", factor="totp", outcome="success") == 1
        assert counts.added("auth_signins_total", **password, outcome="success", error="") == 1
        # Two more wrong codes in another browser: the second is past the limit of 2.
        other = app.test_client()
        sign_in(other, ANN)
        submit_second_factor(other, "000000")
        submit_second_factor(other, "000000")
        assert counts.added("auth_second_factor_total", factor="code", outcome="throttled") == 1
        assert counts.added("auth_throttled_total", throttle="second-factor-user") == 1


# -- identity providers ------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as idp:
        yield idp


def provider_app(make_oauth_app: Callable[..., Flask], fake: FakeIdP, **extra: Any) -> Flask:
    entry = fake.provider_config(revocation_endpoint=fake.issuer + "/revoke", **extra)
    return make_oauth_app([entry], AUTH_METRICS_TOKEN=TOKEN)


def test_oauth_sign_ins_and_provider_calls_are_counted(
    make_oauth_app: Callable[..., Flask], fake: FakeIdP
) -> None:
    app = provider_app(make_oauth_app, fake)
    browser = Browser(app.test_client())
    counts = Counts(browser.client)
    assert error_of(browser.sign_in("fake")) is None
    fake_oidc = {"provider": "fake", "method": "oidc"}
    assert counts.added("auth_signins_total", **fake_oidc, outcome="success", error="") == 1
    for endpoint in ("discovery", "jwks", "token", "userinfo"):
        ok = {"provider": "fake", "endpoint": endpoint}
        assert counts.added("auth_provider_requests_total", **ok, outcome="ok") == 1, endpoint
        assert counts.added("auth_provider_request_duration_seconds_count", **ok) == 1, endpoint
    # The token endpoint fails: a 5xx, counted, and a sign-in refused.
    fake.routes["/token"] = lambda request: (500, {}, {"error": "server_error"})
    assert error_of(browser.sign_in("fake")) == "OAuthCallback"
    token_5xx = {"provider": "fake", "endpoint": "token", "outcome": "5xx"}
    assert counts.added("auth_provider_requests_total", **token_5xx) == 1
    assert counts.added(
        "auth_signins_total", **fake_oidc, outcome="failure", error="OAuthCallback"
    ) == (1)


def test_a_provider_nobody_answers_for_is_counted_unreachable(
    make_oauth_app: Callable[..., Flask],
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    entry = {
        "id": "gone",
        "type": "oidc",
        "name": "Gone",
        "issuer": nowhere,
        "client_id": "c",
        "client_secret": "s" * 40,
    }
    app = make_oauth_app([entry], AUTH_METRICS_TOKEN=TOKEN)
    browser = Browser(app.test_client())
    counts = Counts(browser.client)
    assert browser.start("gone").status_code == 302
    unreachable = {"provider": "gone", "endpoint": "discovery", "outcome": "unreachable"}
    assert counts.added("auth_provider_requests_total", **unreachable) == 1


def test_token_refreshes_and_revocations_are_counted(
    make_oauth_app: Callable[..., Flask], fake: FakeIdP
) -> None:
    refresh_answer: dict[str, Any] = {"status": 200}
    plain_token = fake.routes["/token"]

    def token(request: Any) -> tuple[int, dict[str, str], Any]:
        if request.form.get("grant_type") != "refresh_token":
            return plain_token(request)
        if refresh_answer["status"] != 200:
            return refresh_answer["status"], {}, {"error": refresh_answer.get("error", "x")}
        body = {"access_token": "at-" + secrets.token_urlsafe(8), "expires_in": 30}
        return 200, {}, {**body, "token_type": "Bearer", "refresh_token": "rt-2"}

    fake.routes["/token"] = token
    fake.routes["/revoke"] = lambda request: (200, {}, b"")
    # Tokens due at once (expiring within the 60 s margin), with a refresh token.
    fake.token_extra = {"refresh_token": "rt-1", "expires_in": 30}
    app = provider_app(make_oauth_app, fake)
    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("fake")) is None
    counts = Counts(browser.client)
    assert browser.client.get("/auth/token/fake").status_code == 200
    assert counts.added("auth_token_refreshes_total", provider="fake", outcome="success") == 1
    refresh_ok = {"provider": "fake", "endpoint": "token_refresh", "outcome": "ok"}
    assert counts.added("auth_provider_requests_total", **refresh_ok) == 1
    refresh_answer["status"] = 503
    assert browser.client.get("/auth/token/fake").status_code == 503
    assert counts.added("auth_token_refreshes_total", provider="fake", outcome="unavailable") == 1
    refresh_answer.update(status=400, error="invalid_grant")
    assert browser.client.get("/auth/token/fake").status_code != 200
    assert counts.added("auth_token_refreshes_total", provider="fake", outcome="refused") == 1
    # Revocation: the provider's tokens, refreshed once more, then revoked by the operator.
    refresh_answer["status"] = 200
    fake.token_extra = {"refresh_token": "rt-3", "expires_in": 3600}
    assert error_of(browser.sign_in("fake")) is None
    runner = app.test_cli_runner()
    done = runner.invoke(args=["auth", "revoke-tokens", "--user", "fay@example.com"])
    assert done.exit_code == 0, done.output
    # The refresh token, then the access token.
    assert counts.added("auth_token_revocations_total", provider="fake", outcome="success") == 2
    revoked = {"provider": "fake", "endpoint": "revocation", "outcome": "ok"}
    assert counts.added("auth_provider_requests_total", **revoked) == 2
    fake.routes["/revoke"] = lambda request: (500, {}, {"error": "server_error"})
    assert error_of(browser.sign_in("fake")) is None
    runner.invoke(args=["auth", "revoke-tokens", "--user", "fay@example.com"])
    assert counts.added("auth_token_revocations_total", provider="fake", outcome="failed") == 1


# -- requests, the pool, and what a client cannot choose ---------------------------------


def test_requests_are_timed_by_route(client: FlaskClient) -> None:
    counts = Counts(client)
    for _ in range(3):
        assert client.get("/auth/session").status_code == 200
    session = {"route": "/auth/session", "method": "GET"}
    assert counts.added("auth_http_request_duration_seconds_count", **session) == 3
    assert counts.added("auth_http_requests_total", **session, status="200") == 3
    # By the rule, whatever the provider id named.
    for provider in ("nope", "other"):
        assert client.get(f"/auth/token/{provider}").status_code == 401
    by_rule = {"route": "/auth/token/<provider_id>", "method": "GET", "status": "401"}
    assert counts.added("auth_http_requests_total", **by_rule) == 2
    assert client.get("/auth/csrf").status_code == 200
    assert counts.added("auth_db_pool_checkouts_total") >= 0
    demo_sign_in(client, ANN)
    assert counts.added("auth_db_pool_checkouts_total") >= 1
    assert scrape(client)[("auth_db_pool_size", frozenset())] > 0


def test_no_label_value_comes_from_a_request(client: FlaskClient) -> None:
    """Paths, methods, provider ids, hosts and headers a client makes up add no series:
    the routes are the URL map's rules, anything else ``unmatched`` or ``other``."""
    before = set(scrape(client))
    marker = "zq" + secrets.token_hex(6)
    client.get(f"/{marker}")
    client.get(f"/auth/{marker}/x")
    client.open(f"/auth/{marker}", method=marker.upper())
    client.open("/auth/session", method=marker.upper())
    client.get(f"/auth/signin/{marker}")
    client.post(f"/auth/signin/{marker}", data={"email": marker})
    client.get(f"/auth/callback/{marker}?code={marker}&state={marker}")
    client.get("/auth/session", headers={"Host": f"{marker}.example", "User-Agent": marker})
    demo_sign_in(client, f"{marker}@example.com", marker)
    added = set(scrape(client)) - before
    text = client.get("/metrics", headers=SCRAPER).get_data(as_text=True)
    assert marker not in text and marker.upper() not in text
    values = {value for _, labels in added for _, value in labels}
    assert {"unmatched", "other"} & values
    for _, labels in added:
        route = dict(labels).get("route")
        assert route is None or route == "unmatched" or route.startswith("/"), route


# -- several processes -------------------------------------------------------------------


def test_a_dead_workers_gauges_go_and_its_counts_stay(tmp_path: Path) -> None:
    dead = _a_dead_pid()
    for kind in ("gauge_livesum", "counter", "histogram"):
        for pid in (dead, os.getpid()):
            (tmp_path / f"{kind}_{pid}.db").write_bytes(b"")
    assert exposition.forget_dead_workers(str(tmp_path)) == [dead]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert f"gauge_livesum_{dead}.db" not in left
    assert f"gauge_livesum_{os.getpid()}.db" in left
    assert f"counter_{dead}.db" in left and f"histogram_{dead}.db" in left


def _a_dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
