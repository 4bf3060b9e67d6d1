"""Throttles hold under bursts, and cannot be turned against the owner.

Every throttle counts an attempt before deciding on it (one atomic upsert), so 40 parallel
attempts get no more than the limit: the credentials hook is called at most that often,
at most that many e-mails go out, at most that many beacons are logged. The strict limits
are per (identifier, client address); the looser per-identifier one spares a browser that
has signed in as that person before.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp.core.hooks import AuthHooks, UserInfo
from webapp.settings import ConfigError, RateLimit

from .support.mail import EmailActions, Mailbox
from .support.oauth import write_providers_toml

RACERS = 40
PASSWORD = "correct horse battery staple"


class CountingHook:
    """An authorize hook that is slow (so requests overlap) and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, form: Any) -> UserInfo | None:
        with self.lock:
            self.calls += 1
        time.sleep(0.02)
        if form["email"] == "ann@example.com" and form["password"] == PASSWORD:
            return UserInfo(email="ann@example.com", subject="ann@example.com")
        return None


@pytest.fixture
def credentials_app(make_app: Callable[..., Flask], tmp_path: Any) -> Callable[..., Any]:
    def factory(**overrides: Any) -> tuple[Flask, CountingHook]:
        hook = CountingHook()
        hooks = AuthHooks(authorize=hook)
        toml = write_providers_toml(
            tmp_path / "providers.toml", [{"id": "password", "type": "credentials"}]
        )
        app = make_app(hooks=hooks, AUTH_CONFIG=str(toml), DB_POOL_SIZE="20", **overrides)
        return app, hook

    return factory


def _attempt(client: FlaskClient, password: str, ip: str = "198.51.100.7") -> str:
    token = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    response = client.post(
        "/auth/callback/password",
        environ_base={"REMOTE_ADDR": ip},
        data={"csrfToken": token, "email": "ann@example.com", "password": password},
    )
    return str(response.headers["Location"])


def _race(action: Callable[[int], Any]) -> list[Any]:
    start = threading.Barrier(RACERS)
    results: list[Any] = [None] * RACERS

    def run(n: int) -> None:
        start.wait()
        results[n] = action(n)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_a_burst_of_guesses_gets_no_more_hook_calls_than_the_limit(
    credentials_app: Callable[..., Any],
) -> None:
    app, hook = credentials_app()
    clients = [app.test_client() for _ in range(RACERS)]
    tokens = [c.get("/auth/csrf").json["csrfToken"] for c in clients]  # type: ignore[index]

    def guess(n: int) -> str:
        # The right password is the last guess, as an attacker's list would eventually have it.
        password = PASSWORD if n == RACERS - 1 else f"guess-{n}"
        response = clients[n].post(
            "/auth/callback/password",
            environ_base={"REMOTE_ADDR": "198.51.100.7"},
            data={"csrfToken": tokens[n], "email": "ann@example.com", "password": password},
        )
        return str(response.headers["Location"])

    results = _race(guess)
    assert hook.calls == 5
    assert sum("error=CredentialsSignin" in r for r in results) >= RACERS - 5
    assert results.count("http://localhost/") <= 1


def test_a_burst_of_email_requests_sends_no_more_than_the_limit(
    make_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = make_app(EMAIL_SERVER=mailbox.url(), EMAIL_TIMEOUT="5", DB_POOL_SIZE="20")
    actions = [EmailActions(app.test_client()) for _ in range(RACERS)]
    tokens = [a.csrf() for a in actions]

    def request(n: int) -> int:
        return int(
            actions[n]
            .client.post(
                "/auth/signin/email", data={"csrfToken": tokens[n], "email": "ann@example.com"}
            )
            .status_code
        )

    assert set(_race(request)) == {302}
    assert len(mailbox.messages) == 3


def test_a_burst_of_log_beacons_logs_no_more_than_the_limit(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(DB_POOL_SIZE="20")
    conf = app.extensions["webapp.settings"]
    # No setting names this limit; the test lowers it below the burst on the settings object.
    app.extensions["webapp.settings"] = dataclasses.replace(
        conf, log_beacon_limit=RateLimit(10, conf.log_beacon_limit.window)
    )
    client = app.test_client()
    with caplog.at_level(logging.INFO, logger="webapp.client"):
        statuses = _race(lambda n: client.post("/auth/_log", json={"code": f"E{n}"}).status_code)
    assert sorted(statuses) == [204] * 10 + [429] * (RACERS - 10)
    assert len([r for r in caplog.records if r.name == "webapp.client"]) == 10


def test_wrong_passwords_from_elsewhere_do_not_lock_the_owner_out(
    credentials_app: Callable[..., Any],
) -> None:
    app, hook = credentials_app()
    with freeze_time("2026-05-01 10:00:00"):
        attacker = app.test_client()
        for _ in range(7):
            assert "CredentialsSignin" in _attempt(attacker, "wrong", ip="203.0.113.66")
        assert hook.calls == 5  # the strict limit stopped the attacker's address
        # The owner, from her own address, is not affected.
        assert _attempt(app.test_client(), PASSWORD, ip="192.0.2.10") == "http://localhost/"


def test_a_browser_that_signed_in_before_keeps_its_allowance(
    credentials_app: Callable[..., Any],
) -> None:
    app, hook = credentials_app()
    with freeze_time("2026-05-01 10:00:00"):
        owner = app.test_client()
        assert _attempt(owner, PASSWORD, ip="192.0.2.10") == "http://localhost/"
        # A guess spread over many addresses uses up the per-identifier limit (20) ...
        for n in range(25):
            _attempt(app.test_client(), "wrong", ip=f"203.0.113.{n}")
        assert hook.calls == 1 + 20
        # ... which refuses the owner on a new browser (the cost of that limit) ...
        assert "CredentialsSignin" in _attempt(app.test_client(), PASSWORD, ip="192.0.2.11")
        assert hook.calls == 21
        # ... but not on the browser she signed in with before, even from a new address.
        assert _attempt(owner, PASSWORD, ip="198.51.100.200") == "http://localhost/"
        # That browser has the strict allowance of its own: 5 wrong tries, then refused.
        for _ in range(5):
            _attempt(owner, "wrong", ip="192.0.2.10")
        assert "CredentialsSignin" in _attempt(owner, PASSWORD, ip="192.0.2.10")
    with freeze_time("2026-05-01 10:15:01"):
        assert _attempt(app.test_client(), PASSWORD, ip="192.0.2.11") == "http://localhost/"


def test_a_forged_known_browser_cookie_is_no_allowance(credentials_app: Callable[..., Any]) -> None:
    app, hook = credentials_app()
    with freeze_time("2026-05-01 10:00:00"):
        for n in range(25):
            _attempt(app.test_client(), "wrong", ip=f"203.0.113.{n}")
        forger = app.test_client()
        forger.set_cookie("auth.known-browser", "eyJiIjoieCIsImkiOltdfQ.forged", path="/auth")
        assert "CredentialsSignin" in _attempt(forger, PASSWORD, ip="192.0.2.12")
        assert hook.calls == 20


def test_ipv6_guessers_are_counted_per_64(credentials_app: Callable[..., Any]) -> None:
    app, hook = credentials_app()
    with freeze_time("2026-05-01 10:00:00"):
        for n in range(8):
            _attempt(app.test_client(), "wrong", ip=f"2001:db8:5:6::{n + 1}")
        assert hook.calls == 5


def test_the_credentials_limits_are_settings(
    credentials_app: Callable[..., Any], make_app: Callable[..., Flask]
) -> None:
    app, hook = credentials_app(
        AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT="2/1m",
        AUTH_CREDENTIALS_IP_LIMIT="30/1h",
        AUTH_CREDENTIALS_IDENTIFIER_LIMIT="40/2h",
    )
    conf = app.extensions["webapp.settings"]
    assert (conf.credentials_ip_limit, conf.credentials_identifier_limit) == (
        RateLimit(30, timedelta(hours=1)),
        RateLimit(40, timedelta(hours=2)),
    )
    with freeze_time("2026-05-01 10:00:00"):
        for _ in range(4):
            _attempt(app.test_client(), "wrong")
    assert hook.calls == 2
    with pytest.raises(ConfigError, match="AUTH_CREDENTIALS_IP_LIMIT must look like 3/10m"):
        make_app(AUTH_CREDENTIALS_IP_LIMIT="lots")
