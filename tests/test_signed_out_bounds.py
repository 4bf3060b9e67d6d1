"""Nothing a signed-out client does is unbounded (issue 40, item 2).

Every route that writes a row or calls an outside service for a signed-out client is
throttled before it does (docs/security.md, "Throttles"):

* device sign-in starts, per client address (IPv6 per /64), under a cap on the requests in
  progress, taking expired rows with them (``AUTH_DEVICE_IP_LIMIT``,
  ``AUTH_MAX_DEVICE_REQUESTS``);
* passkey options and answers, per client address, each spent challenge taking expired
  ones with it (``AUTH_PASSKEY_IP_LIMIT``);
* an OAuth callback's code exchange, per client address (``AUTH_OAUTH_IP_LIMIT``);
* the audit trail: a throttle's refusals are one row per key and window, and refusals naming
  no user one row each only up to the client address's allowance (``AUDIT_FAILURE_IP_LIMIT``).

The last test walks the URL map (``app.url_map``, through tests/test_hostile_input.py's
``TARGETS``), so that a route added later is covered without editing it: a signed-out
client sends each route, with realistic inputs, many times more than any throttle allows,
and from then on no table gains a row and nothing more leaves the app (provider calls, at
the HTTP client, and messages).

Provider calls are counted at the HTTP client layer (``OutsideCalls``): every call the app
makes to a provider goes through ``requests``. The real provider is the oidc-provider of
tests/op (``node_op``).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp import create_app
from webapp.audit.trail import Event, subject_hash
from webapp.core.clock import iso_utc
from webapp.flows.signin.device import HANDLE_GRACE
from webapp.passkeys.challenges import MAX_AGE as CHALLENGE_MAX_AGE
from webapp.settings import ConfigError, RateLimit, Settings, load_settings
from webapp.storage.db import db
from webapp.storage.models import AuthEvent, DeviceRequest, SpentChallenge

from .support.audit import PASSWORD_PROVIDER, WRONG_PASSWORD, password_hooks, sign_in
from .support.config import BROWSER_THROTTLES, base_config
from .support.databases import empty_tables
from .support.mail import EmailActions, Outbox
from .support.oauth import APP_ORIGIN, Browser, NodeOP, query_of, write_providers_toml
from .support.routes import TARGETS, Target
from .support.rows import row_count
from .support.second_factor import enrol_authenticator, submit_second_factor

ERROR_URL = APP_ORIGIN + "/auth/error?error="
DEVICE = "op-device"
OPTIONS = "/auth/webauthn-options/passkey?action=authenticate"
PASSKEY_CALLBACK = "/auth/callback/passkey"
#: A passkey answer that is well-formed JSON and nothing more.
JUNK_ANSWER = json.dumps({"id": "AAAA", "rawId": "AAAA", "type": "public-key", "response": {}})


class OutsideCalls:
    """The HTTP requests the app sends, counted where every one of them passes: the
    ``requests`` transport (discovery, keys, tokens, device codes, introspection)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.urls: list[str] = []
        send = requests.adapters.HTTPAdapter.send

        def counting(adapter: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            self.urls.append(str(request.url))
            return send(adapter, request, *args, **kwargs)

        monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", counting)

    def to(self, url: str) -> int:
        return sum(1 for sent in self.urls if sent.split("?", 1)[0] == url)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> OutsideCalls:
    return OutsideCalls(monkeypatch)


def client_at(app: Flask, address: str) -> FlaskClient:
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def csrf(client: FlaskClient) -> str:
    return str(client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]


def events(app: Flask, event: Event | None = None) -> list[AuthEvent]:
    with app.app_context():
        query = sa.select(AuthEvent).order_by(AuthEvent.id)
        if event is not None:
            query = query.where(AuthEvent.type == event.value)
        found = list(db.session.scalars(query))
        db.session.expunge_all()
        return found


def window_start(seconds: int, *, after: datetime) -> datetime:
    """The start of the first fixed window of ``seconds`` after ``after`` (ratelimit's)."""
    start = (int(after.timestamp()) // seconds + 1) * seconds
    return datetime.fromtimestamp(start, UTC)


# -- the settings --------------------------------------------------------------------------

PRODUCTION = {
    "AUTH_SECRET": "s" * 40,
    "AUTH_URL": "https://example.com/auth",
    "DATABASE_URL": "postgresql://app@db.example/app",
}


@pytest.mark.parametrize(
    "name,key,value,expected",
    [
        ("AUTH_DEVICE_IP_LIMIT", "device_ip_limit", "4/1m", RateLimit(4, timedelta(minutes=1))),
        ("AUTH_MAX_DEVICE_REQUESTS", "max_device_requests", "25", 25),
        ("AUTH_PASSKEY_IP_LIMIT", "passkey_ip_limit", "7/2h", RateLimit(7, timedelta(hours=2))),
        ("AUTH_OAUTH_IP_LIMIT", "oauth_ip_limit", "9/30s", RateLimit(9, timedelta(seconds=30))),
        (
            "AUDIT_FAILURE_IP_LIMIT",
            "audit_failure_ip_limit",
            "50/1h",
            RateLimit(50, timedelta(hours=1)),
        ),
    ],
)
def test_the_limits_come_from_the_environment_or_the_toml_file(
    tmp_path: Path, name: str, key: str, value: str, expected: Any
) -> None:
    assert getattr(load_settings(PRODUCTION), key) == getattr(Settings, key)
    assert getattr(load_settings({**PRODUCTION, name: value}), key) == expected
    toml = tmp_path / "auth.toml"
    toml.write_text(f"[auth]\n{key} = {json.dumps(value)}\n")
    assert getattr(load_settings({**PRODUCTION, "AUTH_CONFIG": str(toml)}), key) == expected


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("AUTH_DEVICE_IP_LIMIT", "ten", "AUTH_DEVICE_IP_LIMIT must look like 3/10m"),
        ("AUTH_MAX_DEVICE_REQUESTS", "0", "AUTH_MAX_DEVICE_REQUESTS must be at least 1"),
        ("AUTH_PASSKEY_IP_LIMIT", "60/15d", "AUTH_PASSKEY_IP_LIMIT must look like 3/10m"),
        ("AUTH_OAUTH_IP_LIMIT", "0/15m", "AUTH_OAUTH_IP_LIMIT must look like 3/10m"),
        ("AUDIT_FAILURE_IP_LIMIT", "lots", "AUDIT_FAILURE_IP_LIMIT must look like 3/10m"),
    ],
)
def test_a_bad_limit_stops_start_up_naming_it(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({**PRODUCTION, name: value})


# -- device sign-in starts -----------------------------------------------------------------


@pytest.fixture
def device_app(node_op: NodeOP, make_oauth_app: Callable[..., Flask]) -> Callable[..., Flask]:
    """``device_app(**settings)``: the app with the provider's device client."""

    def factory(**settings: str) -> Flask:
        entry = node_op.provider_config(DEVICE, name="Acme TV", device_flow=True)
        return make_oauth_app([entry], **settings)

    return factory


def start_device(app: Flask, address: str) -> Any:
    """POST device/<id> from ``address`` as a client holding no cookie but the CSRF pair."""
    client = client_at(app, address)
    return client.post(f"/auth/device/{DEVICE}", data={"csrfToken": csrf(client)})


@pytest.mark.e2e
def test_80_device_starts_from_one_address_ask_the_provider_only_up_to_the_limit(
    device_app: Callable[..., Flask], node_op: NodeOP, calls: OutsideCalls
) -> None:
    endpoint = node_op.discovery()["device_authorization_endpoint"]
    app = device_app()
    limit = Settings.device_ip_limit.limit
    answers = [start_device(app, "203.0.113.7") for _ in range(80)]

    # Issue 40: 80 rows and 80 calls to the provider; now the allowance and no more.
    assert (row_count(app, DeviceRequest), calls.to(endpoint)) == (limit, limit)
    assert [a.status_code for a in answers] == [303] * limit + [302] * (80 - limit)
    assert {a.headers["Location"] for a in answers[limit:]} == {ERROR_URL + "RateLimited"}
    page = client_at(app, "203.0.113.7").get(answers[-1].headers["Location"])
    assert page.status_code == 429 and "Too many attempts" in page.get_data(as_text=True)
    # The throttle is on record once, naming the limit it hit; the rest went to the log.
    [throttled] = events(app)
    assert (throttled.type, throttled.error_code, throttled.provider) == (
        Event.THROTTLED.value,
        "RateLimited",
        DEVICE,
    )
    assert throttled.detail["throttle"] == "device-ip" and throttled.detail["limit"] == limit


@pytest.mark.e2e
def test_ipv6_addresses_in_one_64_share_one_allowance(
    device_app: Callable[..., Flask], node_op: NodeOP, calls: OutsideCalls
) -> None:
    endpoint = node_op.discovery()["device_authorization_endpoint"]
    app = device_app(AUTH_DEVICE_IP_LIMIT="3/15m")
    same_64 = ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:aaaa::9", "2001:db8:1:2:ffff::"]
    statuses = [start_device(app, address).status_code for address in same_64]
    assert statuses == [303, 303, 303, 302]
    assert start_device(app, "2001:db8:1:3::1").status_code == 303  # the next /64
    assert (row_count(app, DeviceRequest), calls.to(endpoint)) == (4, 4)


@pytest.mark.e2e
def test_device_requests_in_progress_are_capped_whatever_the_addresses(
    device_app: Callable[..., Flask], node_op: NodeOP, calls: OutsideCalls
) -> None:
    endpoint = node_op.discovery()["device_authorization_endpoint"]
    app = device_app(AUTH_MAX_DEVICE_REQUESTS="3")
    answers = [start_device(app, f"198.51.100.{n}") for n in range(1, 6)]
    assert [a.status_code for a in answers] == [303, 303, 303, 302, 302]
    assert answers[-1].headers["Location"] == ERROR_URL + "RateLimited"
    assert (row_count(app, DeviceRequest), calls.to(endpoint)) == (3, 3)
    # Once the codes have expired (the provider's live 600 s) there is room again.
    with freeze_time(datetime.now(UTC) + timedelta(seconds=601), tick=True):
        assert start_device(app, "198.51.100.9").status_code == 303
    assert calls.to(endpoint) == 4


@pytest.mark.e2e
def test_expired_device_requests_go_as_new_ones_start(device_app: Callable[..., Flask]) -> None:
    app = device_app()
    for n in range(1, 4):
        assert start_device(app, f"198.51.100.{n}").status_code == 303
    now = datetime.now(UTC)
    # Expired, but their page may still say so (the handle's grace): kept.
    with freeze_time(now + timedelta(seconds=610), tick=True):
        assert start_device(app, "198.51.100.4").status_code == 303
    assert row_count(app, DeviceRequest) == 4
    # Past the grace: the next start takes them with it (the one from +610 s still lives).
    with freeze_time(now + timedelta(seconds=600 + HANDLE_GRACE + 20), tick=True):
        assert start_device(app, "198.51.100.5").status_code == 303
    assert row_count(app, DeviceRequest) == 2


# -- passkey challenges --------------------------------------------------------------------


def junk_answer(client: FlaskClient) -> Any:
    """POST callback/passkey with an answer no authenticator made (JSON mode)."""
    form = {"csrfToken": csrf(client), "action": "authenticate", "data": JUNK_ANSWER}
    return client.post(PASSKEY_CALLBACK, data=form, headers={"X-Auth-Return-Redirect": "1"})


def junk_ceremony(client: FlaskClient) -> tuple[int, Any]:
    """GET webauthn-options, then POST callback/passkey with junk: the options' status and
    the answer's."""
    return client.get(OPTIONS).status_code, junk_answer(client)


def test_junk_passkey_ceremonies_spend_challenges_only_up_to_the_allowance(
    make_app: Callable[..., Flask],
) -> None:
    app = make_app(AUTH_PASSKEY_IP_LIMIT="5/15m")
    client = client_at(app, "203.0.113.7")
    ceremonies = [junk_ceremony(client) for _ in range(30)]

    # Issue 40: a row per ceremony (30); now the allowance.
    assert row_count(app, SpentChallenge) == 5
    assert [options for options, _ in ceremonies] == [200] * 5 + [429] * 25
    assert {answer.json["url"] for _, answer in ceremonies[:5]} == {
        APP_ORIGIN + "/auth/signin?error=PasskeySignin"
    }
    assert {answer.json["url"] for _, answer in ceremonies[5:]} == {ERROR_URL + "RateLimited"}
    refused = client.get(OPTIONS)
    assert (refused.status_code, refused.json) == (429, {"error": "RateLimited"})
    throttles = [e.detail["throttle"] for e in events(app, Event.THROTTLED)]
    assert sorted(throttles) == ["passkey-answer-ip", "passkey-options-ip"]


def test_passkey_answers_are_throttled_on_their_own(make_app: Callable[..., Flask]) -> None:
    """Challenges fetched from several addresses, each within its allowance of options,
    then all answered from one: the answers' allowance bounds the rows."""
    app = make_app(AUTH_PASSKEY_IP_LIMIT="3/15m")
    challenges = []
    for n in range(1, 4):
        fetcher = client_at(app, f"198.51.100.{n}")
        for _ in range(3):
            assert fetcher.get(OPTIONS).status_code == 200
            cookie = fetcher.get_cookie("auth.passkey-challenge", path="/auth")
            assert cookie is not None
            challenges.append(cookie.value)
    answerer = client_at(app, "203.0.113.7")
    urls = []
    for challenge in challenges:
        answerer.set_cookie("auth.passkey-challenge", challenge, path="/auth")
        urls.append(junk_answer(answerer).json["url"])
    assert row_count(app, SpentChallenge) == 3
    assert urls[3:] == [ERROR_URL + "RateLimited"] * 6


def test_expired_spent_challenges_go_as_new_ones_are_spent(make_app: Callable[..., Flask]) -> None:
    app = make_app()
    for n in range(1, 4):
        junk_ceremony(client_at(app, f"198.51.100.{n}"))
    assert row_count(app, SpentChallenge) == 3
    with freeze_time(datetime.now(UTC) + timedelta(seconds=CHALLENGE_MAX_AGE + 1)):
        junk_ceremony(client_at(app, "198.51.100.9"))
    assert row_count(app, SpentChallenge) == 1


# -- OAuth code exchanges ------------------------------------------------------------------


@pytest.mark.e2e
def test_made_up_codes_reach_the_provider_only_up_to_the_limit(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask], calls: OutsideCalls
) -> None:
    token_endpoint = node_op.discovery()["token_endpoint"]
    app = make_oauth_app([node_op.provider_config("op-basic")], AUTH_OAUTH_IP_LIMIT="3/15m")
    browser = Browser(client_at(app, "203.0.113.7"))
    answers = []
    for n in range(10):
        # Each round as an attacker would: a real start (its check cookies), a made-up code.
        state = query_of(browser.start("op-basic").headers["Location"])["state"]
        query = {"code": f"made-up-{n}", "state": state, "iss": node_op.issuer}
        answers.append(browser.client.get("/auth/callback/op-basic", query_string=query))
    assert calls.to(token_endpoint) == 3
    locations = [a.headers["Location"] for a in answers]
    assert locations == [ERROR_URL + "OAuthCallback"] * 3 + [ERROR_URL + "RateLimited"] * 7


@pytest.mark.e2e
def test_codes_the_provider_takes_give_their_count_back(
    node_op: NodeOP, make_oauth_app: Callable[..., Flask]
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")], AUTH_OAUTH_IP_LIMIT="2/15m")
    for _ in range(4):
        browser = Browser(client_at(app, "203.0.113.7"))
        answer = browser.sign_in("op-basic", login_hint="alice", callback_url="/after")
        assert answer.headers["Location"] == APP_ORIGIN + "/after"


# -- the audit trail -----------------------------------------------------------------------


def test_150_wrong_passwords_leave_one_throttled_row_per_key_and_window(
    password_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="webapp.audit.trail")
    app = password_app()
    limit = Settings.credentials_identifier_ip_limit
    seconds = int(limit.window.total_seconds())
    first = window_start(seconds, after=datetime.now(UTC))
    client = app.test_client()
    for window in (first, first + limit.window):
        with freeze_time(window + timedelta(seconds=1)):
            answers = [sign_in(client, "ann@example.com", WRONG_PASSWORD) for _ in range(150)]
        assert {a.headers["Location"] for a in answers} == {
            ERROR_URL + "CredentialsSignin&code=credentials"
        }

    # Issue 40: 150 rows a window; now the 5 guesses the hook saw, and one for the throttle.
    assert len(events(app)) == 2 * (limit.limit + 1)
    throttled = events(app, Event.THROTTLED)
    with app.app_context():
        ann = subject_hash("ann@example.com")
    assert [(e.detail, e.subject_hash, e.provider) for e in throttled] == [
        (
            {
                "throttle": "credentials-id-ip",
                "limit": limit.limit,
                "until": iso_utc(window + limit.window),
            },
            ann,
            "password",
        )
        for window in (first, first + limit.window)
    ]
    logged = [m for m in caplog.messages if "credentials-id-ip throttle" in m]
    assert len(logged) == 2 * (150 - limit.limit)
    assert sum("recorded once already" in line for line in logged) == 2 * (150 - limit.limit - 1)


@pytest.fixture
def email_outbox_app(make_app: Callable[..., Flask], outbox: Outbox) -> Flask:
    """The app with e-mail sign-in through the development outbox."""
    return make_app(EMAIL_OUTBOX=str(outbox.folder))


def test_150_email_requests_leave_one_throttled_row_per_key_and_window(
    email_outbox_app: Flask, outbox: Outbox
) -> None:
    app = email_outbox_app
    limit = Settings.email_address_ip_limit
    first = window_start(int(limit.window.total_seconds()), after=datetime.now(UTC))
    mail = EmailActions(app.test_client())
    for window in (first, first + limit.window):
        with freeze_time(window + timedelta(seconds=1)):
            for _ in range(150):
                assert mail.request_link("ann@example.com").status_code == 302
    assert len(outbox.messages()) == 2 * limit.limit
    assert len(events(app, Event.EMAIL_REQUESTED)) == 2 * limit.limit
    # Issue 40: 147 throttled rows a window; now one.
    throttled = events(app, Event.THROTTLED)
    assert [e.detail["throttle"] for e in throttled] == ["email-id-ip", "email-id-ip"]
    assert len(events(app)) == 2 * (limit.limit + 1)


def test_refusals_naming_no_user_are_recorded_up_to_the_allowance(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="webapp.audit.trail")
    app = make_app(AUDIT_FAILURE_IP_LIMIT="10/15m")
    link = "/auth/callback/email?token=" + "t" * 43 + "&email=ann%40example.com"
    client = client_at(app, "203.0.113.7")
    assert {client.get(link).headers["Location"] for _ in range(40)} == {ERROR_URL + "Verification"}
    assert len(events(app, Event.EMAIL_REFUSED)) == 10
    [throttled] = events(app, Event.THROTTLED)
    assert (throttled.detail["throttle"], throttled.detail["limit"]) == ("audit-ip", 10)
    assert throttled.subject_hash is None and throttled.ip == "203.0.113.7"
    unrecorded = [m for m in caplog.messages if "refused by the audit-ip throttle" in m]
    assert len(unrecorded) == 30
    assert unrecorded[-1].startswith("the record of email.refused (Verification) refused")
    # Another address has an allowance of its own.
    client_at(app, "203.0.113.8").get(link)
    assert len(events(app, Event.EMAIL_REFUSED)) == 11


def test_a_refusal_naming_a_user_is_recorded_past_the_allowance(
    password_app: Callable[..., Flask],
) -> None:
    email = {"id": "email", "type": "email", "name": "Email"}
    app = password_app([email], AUDIT_FAILURE_IP_LIMIT="2/15m")
    ann = app.test_client()
    assert sign_in(ann, "ann@example.com").status_code == 302
    enrol_authenticator(ann)
    # The address's allowance of refusals naming nobody is used up…
    for _ in range(5):
        ann.get("/auth/callback/email?token=junk&email=someone%40example.com")
    assert len(events(app, Event.THROTTLED)) == 1
    # …and a wrong code in Ann's sign-in is on her record all the same.
    pending = app.test_client()
    sign_in(pending, "ann@example.com")
    assert submit_second_factor(pending, "000000").status_code == 400
    [failed] = events(app, Event.CODE_FAILED)
    assert failed.user_id is not None and failed.error_code == "WrongCode"


# -- every route of the URL map ------------------------------------------------------------

#: Every configurable throttle, small: a few rounds of the walk pass each.
SMALL_LIMITS = {name: "2/1h" for name in BROWSER_THROTTLES}
#: Above the others, so that each throttle's own record comes before the trail's allowance.
AUDIT_ALLOWANCE = "3/1h"
#: Requests per route: many times any limit above. The last third must change nothing.
ROUNDS = 12
#: The providers the walk's app has, by kind: each route naming a provider gets each.
OAUTH_PROVIDERS = ("op-basic", DEVICE)
PROVIDERS = ("password", "email", "passkey", *OAUTH_PROVIDERS)
#: Path parameters other than the provider: a plausible value each.
PATH_VALUES = {"code": "de"}
#: The throttles' own rows, bounded per key and window: not what is measured.
THROTTLE_TABLE = "rate_limit_counters"
CALLS, MESSAGES = "outside calls", "messages"


@dataclass(frozen=True)
class Case:
    """One route, one method, and the provider its path names (if any)."""

    target: Target
    provider: str | None

    def __str__(self) -> str:
        return f"{self.target}" + (f" [{self.provider}]" if self.provider else "")


def _cases() -> list[Case]:
    found = []
    for target in TARGETS:
        if target.method not in ("GET", "POST"):  # HEAD is GET's view; OPTIONS is Flask's
            continue
        names = {name for _conv, name in target.params}
        providers = PROVIDERS if "provider_id" in names else (None,)
        found += [Case(target, provider) for provider in providers]
    return found


CASES = _cases()


class Walk:
    """One app on one database: sends a route ROUNDS times as one signed-out browser (from
    an address of its own) and measures what each round added."""

    def __init__(self, app: Flask, outbox: Path, calls: OutsideCalls, issuer: str) -> None:
        self.app = app
        self.outbox = outbox
        self.calls = calls
        self.issuer = issuer
        self.browsers = 0
        with app.app_context():
            self.tables = [t.name for t in db.metadata.sorted_tables if t.name != THROTTLE_TABLE]
            self.engine = db.engine
        self.count_rows = sa.text(
            " UNION ALL ".join(f"SELECT '{t}', COUNT(*) FROM \"{t}\"" for t in self.tables)
        )

    def measure(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            found = {name: int(count) for name, count in conn.execute(self.count_rows)}
        found[CALLS] = len(self.calls.urls)
        found[MESSAGES] = len(list(self.outbox.glob("*.eml")))
        return found

    def run(self, case: Case) -> list[dict[str, int]]:
        """What each round added (only what changed). Each round is a client that keeps no
        cookie from the rounds before it (the CSRF pair aside): nothing it did before, such
        as a device request to replace, holds it back."""
        self.browsers += 1
        address = f"10.40.{self.browsers >> 8}.{self.browsers & 255}"
        first = client_at(self.app, address)
        token = csrf(first)
        pair = first.get_cookie("auth.csrf-token")
        assert pair is not None
        values = {"provider_id": case.provider} if case.provider else {}
        for _conv, name in case.target.params:
            values.setdefault(name, PATH_VALUES.get(name, "1"))
        path = self.app.url_map.bind("localhost").build(
            case.target.endpoint, values, method=case.target.method
        )
        growth = []
        before = self.measure()
        for round_ in range(ROUNDS):
            client = client_at(self.app, address)
            client.set_cookie("auth.csrf-token", pair.value)
            fields = self._fields(case, client, token, f"{self.browsers}-{round_}")
            if case.target.method == "GET":
                client.get(path, query_string=fields)
            else:
                client.post(path, data=fields, headers={"X-CSRFToken": token})
            after = self.measure()
            growth.append({k: after[k] - before[k] for k in after if after[k] != before[k]})
            before = after
        return growth

    def _fields(self, case: Case, client: FlaskClient, token: str, nth: str) -> dict[str, str]:
        """What a client fills in, each field a plausible guess (every route reads its own),
        after what a browser does right before such a request."""
        fields = {
            "csrfToken": token,
            "email": f"guess-{nth}@example.com",
            "password": WRONG_PASSWORD,
            "token": secrets.token_urlsafe(32),
            "code": "ABCD2345",
            "action": "authenticate",
            "data": JUNK_ANSWER,
            "name": "My key",
            "logout_token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
            "callbackUrl": "/",
            "next": "/account",
            "confirm": "DELETE",
        }
        if case.target.endpoint == "auth.callback" and case.provider in OAUTH_PROVIDERS:
            # A real start for its check cookies and state, then a made-up code.
            start = client.post(f"/auth/signin/{case.provider}", data={"csrfToken": token})
            state = query_of(start.headers["Location"])["state"]
            fields.update(state=state, iss=self.issuer, code=f"made-up-{nth}")
        if case.target.endpoint == "auth.callback" and case.provider == "passkey":
            client.get(OPTIONS)  # a fresh challenge to spend
        return fields


@pytest.fixture(scope="module")
def walk(
    database_url: str, node_op: NodeOP, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Walk]:
    """The app with every kind of provider (credentials, e-mail through the outbox,
    passkeys, the provider's code and device clients), its throttles small."""
    workdir = tmp_path_factory.mktemp("walk")
    outbox = workdir / "outbox"
    outbox.mkdir()
    toml = write_providers_toml(
        workdir / "auth.toml",
        [
            PASSWORD_PROVIDER,
            {"id": "email", "type": "email", "name": "Email"},
            node_op.provider_config("op-basic", backchannel_logout=True),
            node_op.provider_config(DEVICE, device_flow=True),
        ],
    )
    config = base_config(
        database_url,
        AUTH_CONFIG=str(toml),
        AUTH_PASSKEYS="true",
        EMAIL_OUTBOX=str(outbox),
        AUDIT_FAILURE_IP_LIMIT=AUDIT_ALLOWANCE,
        **SMALL_LIMITS,
    )
    app = create_app(config, environ={}, hooks=password_hooks())
    with app.app_context():
        empty_tables()
    with pytest.MonkeyPatch.context() as patch:
        yield Walk(app, outbox, OutsideCalls(patch), node_op.issuer)
    with app.app_context():
        empty_tables()
        db.engine.dispose()


def _table(growth: list[dict[str, int]]) -> str:
    return "\n".join(f"  round {n + 1:>2}: {added or '-'}" for n, added in enumerate(growth))


@pytest.mark.e2e
@pytest.mark.parametrize("case", CASES, ids=str)
def test_what_a_signed_out_client_sends_stops_writing_and_calling(walk: Walk, case: Case) -> None:
    growth = walk.run(case)
    late = [added for added in growth[-ROUNDS // 3 :] if added]
    assert late == [], f"{case}: still growing in the last third:\n{_table(growth)}"


@pytest.mark.e2e
def test_the_walk_reaches_what_writes_and_calls(walk: Walk) -> None:
    """Its inputs get past the door: where a route writes or calls out, the first rounds
    do (otherwise the test above would pass without testing anything)."""

    def first_rounds(pattern: str, method: str, provider: str | None) -> dict[str, int]:
        [case] = [
            c
            for c in CASES
            if (c.target.pattern, c.target.method, c.provider) == (pattern, method, provider)
        ]
        total: dict[str, int] = {}
        for added in walk.run(case)[: ROUNDS // 3]:
            for key, value in added.items():
                total[key] = total.get(key, 0) + value
        return total

    device = first_rounds("/auth/device/<provider_id>", "POST", DEVICE)
    # (Its first start may also fetch the provider's discovery document.)
    assert device["device_requests"] == 2 and device[CALLS] >= 2, device
    passkey = first_rounds("/auth/callback/<provider_id>", "POST", "passkey")
    assert passkey["spent_challenges"] == 2, passkey
    email = first_rounds("/auth/signin/<provider_id>", "POST", "email")
    assert email["verification_tokens"] == 2 and email[MESSAGES] == 2, email
    credentials = first_rounds("/auth/callback/<provider_id>", "POST", "password")
    assert credentials["auth_events"] == 3, credentials  # two guesses, one throttle record
    oauth = first_rounds("/auth/callback/<provider_id>", "GET", "op-basic")
    assert oauth[CALLS] >= 2, oauth
