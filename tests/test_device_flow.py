"""Sign-in with the device authorization grant (RFC 8628): the device page, its polls, the
CLI's ``flask auth device-login``.

Against the real oidc-provider on loopback (tests/op/server.mjs): it hands out device
codes, lets a "phone" approve or deny them (``NodeOP.approve_device``), expires them on
request, answers ``slow_down`` when polled sooner than its interval, and logs every poll
with its time (``NodeOP.device_polls``), which is how these tests count what reached it.
A FakeIdP stands in only for answers the real provider never gives: hostile device
authorization responses, bad ID tokens, odd token endpoint errors.

Time: the provider's clock is real, so waits are real and short (its interval is 1 s).
Where a test only needs the next poll to be due, ``Device.due`` moves the row's
``next_poll_at`` to now instead of sleeping: it stands in for waiting out the interval
(and the provider never finds a first poll too early).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from joserfc import jwt
from joserfc.jwk import RSAKey

from webapp.browser_state import sealed_cookies
from webapp.flows.signin import device as device_flow
from webapp.storage.db import db
from webapp.storage.models import Account, DeviceRequest, Session, User

from .support.oauth import (
    APP_ORIGIN,
    DEVICE_GRANT,
    DEVICE_INTERVAL,
    DEVICE_SHORT_TTL,
    DEVICE_SLOW_DOWN_INCREMENT,
    FakeIdP,
    NodeOP,
    parse_forms,
)
from .support.rows import hearing_of_new_rows
from .support.servers import free_port

pytestmark = pytest.mark.e2e

SESSION_COOKIE = "auth.session-token"
#: The purpose the handle cookie is sealed for (webapp/flows/signin/device.py).
HANDLE_PURPOSE = "device-handle"
#: The app's names for the provider's device clients.
NAMES = {"op-device": "Acme TV", "op-device-public": "Public TV", "op-device-short": "Short TV"}
ANN = "ann@example.com"
ERROR_URL = APP_ORIGIN + "/auth/error?error="


@pytest.fixture
def app(node_op: NodeOP, make_oauth_app: Callable[..., Flask]) -> Flask:
    """The app with the provider's three device clients and op-basic (device flow off).

    It replaces conftest's ``app``, so ``client`` and ``count_sql`` use it too."""
    entries = [
        node_op.provider_config(client_id, name=name, device_flow=True)
        for client_id, name in NAMES.items()
    ]
    return make_oauth_app([*entries, node_op.provider_config("op-basic", name="Acme SSO")])


# -- helpers ----------------------------------------------------------------------------


def heading(response: Any) -> str:
    found = re.search(r'<h1 id="card-title">(.*?)</h1>', response.text, re.S)
    assert found, response.text
    return found[1].strip()


def user_code_of(response: Any) -> str:
    found = re.search(r'<p class="user-code">(.*?)</p>', response.text)
    assert found, response.text
    return found[1]


class Device:
    """One browser at the device page (a Flask test client), for one provider."""

    def __init__(
        self, app: Flask, provider: str = "op-device", client: FlaskClient | None = None
    ) -> None:
        self.app = app
        self.provider = provider
        self.client = client or app.test_client()
        self.user_code: str | None = None
        #: Every answer the app gave this browser through this helper.
        self.responses: list[Any] = []

    @property
    def status_url(self) -> str:
        return f"/auth/device/{self.provider}/status"

    @property
    def cookie_name(self) -> str:
        return f"auth.device.{self.provider}"

    def _keep(self, response: Any) -> Any:
        self.responses.append(response)
        return response

    def csrf(self) -> str:
        return str(self._keep(self.client.get("/auth/csrf")).json["csrfToken"])

    def start(self, *, callback_url: str | None = None, csrf: str | None = "fetch") -> Any:
        """POST the device form; return the app's answer."""
        form: dict[str, str] = {}
        if csrf is not None:
            form["csrfToken"] = self.csrf() if csrf == "fetch" else csrf
        if callback_url:
            form["callbackUrl"] = callback_url
        return self._keep(self.client.post(f"/auth/device/{self.provider}", data=form))

    def begin(self, *, callback_url: str | None = None) -> Any:
        """Start, follow the 303 to the code page (not due yet: it does not poll) and note
        the user code; return the page."""
        start = self.start(callback_url=callback_url)
        assert start.status_code == 303, start.status_code
        assert start.headers["Location"] == APP_ORIGIN + self.status_url
        page = self.status()
        assert page.status_code == 200
        assert heading(page) == f"Enter the code at {NAMES[self.provider]}"
        self.user_code = user_code_of(page)
        return page

    def status(self, *, htmx: bool = False) -> Any:
        headers = {"HX-Request": "true"} if htmx else {}
        return self._keep(self.client.get(self.status_url, headers=headers))

    def cookie(self) -> str | None:
        found = self.client.get_cookie(self.cookie_name)
        return found.value if found else None

    def row(self) -> DeviceRequest | None:
        """This browser's request row (found by its user code), or None."""
        with self.app.app_context():
            row = db.session.scalars(
                sa.select(DeviceRequest).where(DeviceRequest.user_code == self.user_code)
            ).one_or_none()
            db.session.expunge_all()
            return row

    def due(self) -> None:
        """Make the next poll due now (stands in for waiting out the interval)."""
        with self.app.app_context():
            done = db.session.execute(
                sa.update(DeviceRequest)
                .where(DeviceRequest.user_code == self.user_code)
                .values(next_poll_at=datetime.now(UTC) - timedelta(milliseconds=1))
            ).rowcount
            db.session.commit()
        assert done == 1

    def wait_until_due(self) -> None:
        """Sleep until the row's next poll is due (real time)."""
        row = self.row()
        assert row is not None
        time.sleep(max(0.0, (row.next_poll_at - datetime.now(UTC)).total_seconds() + 0.02))

    def session_json(self) -> Any:
        return self.client.get("/auth/session").json


def table(app: Flask, model: Any) -> list[Any]:
    """Every row of ``model``, every column loaded (deferred ones too), detached."""
    with app.app_context():
        query = sa.select(model).order_by(model.id).options(sa.orm.undefer("*"))
        rows = list(db.session.scalars(query))
        db.session.expunge_all()
        return rows


def polls_since(node_op: NodeOP, client_id: str, since: float) -> list[dict[str, Any]]:
    return [p for p in node_op.device_polls(client_id) if p["at"] >= since]


def answers_since(node_op: NodeOP, client_id: str, since: float) -> list[str]:
    return [p["answer"] for p in polls_since(node_op, client_id, since)]


def assert_signed_out(app: Flask, device: Device) -> None:
    assert device.session_json() is None
    assert device.client.get_cookie(SESSION_COOKIE) is None
    assert table(app, Session) == []


def assert_no_code_in_progress(device: Device, provider_name: str) -> None:
    page = device.status()
    assert page.status_code == 200
    assert heading(page) == "No code in progress"
    [form] = parse_forms(page.text)
    assert (form.method, form.action) == ("post", f"/auth/device/{device.provider}")
    assert f"Get a new code for {provider_name}" in page.text
    assert "hx-get" not in page.text and 'http-equiv="refresh"' not in page.text


# -- the device page ------------------------------------------------------------------


def test_device_page_offers_only_providers_with_device_flow(client: FlaskClient) -> None:
    page = client.get("/auth/device?callbackUrl=/account")
    assert page.status_code == 200
    forms = parse_forms(page.text)
    assert [f.action for f in forms] == [f"/auth/device/{p}" for p in NAMES]
    assert all(f.method == "post" and f.fields["csrfToken"] for f in forms)
    assert all(f.fields["callbackUrl"] == "/account" for f in forms)
    for name in NAMES.values():
        assert f"Get a code for {name}" in page.text
    assert "op-basic" not in page.text and "Acme SSO" not in page.text

    # A callbackUrl off the site is not carried on.
    page = client.get("/auth/device?callbackUrl=https://evil.example/")
    assert "evil.example" not in page.text
    assert all("callbackUrl" not in f.fields for f in parse_forms(page.text))


def test_device_page_without_device_providers(node_op: NodeOP, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    page = app.test_client().get("/auth/device")
    assert page.status_code == 200
    assert "No sign-in provider here offers sign-in with a code." in page.text
    assert parse_forms(page.text) == []


def test_code_page_shows_code_link_qr_and_polls(app: Flask, node_op: NodeOP) -> None:
    device = Device(app)
    page = device.begin()
    row = device.row()
    assert row is not None and device.user_code == row.user_code
    verification = f"{node_op.issuer}/device"
    assert f'<a href="{verification}" rel="noreferrer">{verification}</a>' in page.text
    # The QR code: inline SVG drawn here, with an accessible name, no image from elsewhere.
    svg = re.search(r"<svg [^>]*>.*?</svg>", page.text, re.S)
    assert svg and 'role="img"' in svg[0]
    assert f"<title>QR code: {NAMES['op-device']}'s page with the code filled in</title>" in svg[0]
    assert row.verification_uri_complete == f"{verification}?user_code={row.user_code}"
    assert "<img" not in page.text
    # htmx polls every interval; without JavaScript the page reloads itself as often.
    status = re.search(r'<p id="device-status"[^>]*>', page.text)
    assert status is not None
    assert f'hx-get="{device.status_url}"' in status[0]
    assert f'hx-trigger="every {DEVICE_INTERVAL}s"' in status[0]
    assert f'<noscript><meta http-equiv="refresh" content="{DEVICE_INTERVAL}"></noscript>' in (
        page.text
    )
    assert "The code expires in 9 minutes." in page.text or "The code expires in 10 minutes." in (
        page.text
    )
    # "I have approved it" reloads the status page, without JavaScript.
    [approved] = [f for f in parse_forms(page.text) if f.action == device.status_url]
    assert approved.method == "get"
    assert "I have approved it" in page.text

    # A poll by htmx gets the status line only: the code, the QR code and the focus stay.
    fragment = device.status(htmx=True)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<p id="device-status"')
    assert f'hx-trigger="every {DEVICE_INTERVAL}s"' in fragment.text
    assert "Waiting for you to approve it." in fragment.text
    assert "<html" not in fragment.text and "<h1" not in fragment.text
    assert "<svg" not in fragment.text and str(device.user_code) not in fragment.text
    assert "HX-Retarget" not in fragment.headers
    assert "no-store" in fragment.headers["Cache-Control"]


# -- approved, denied, expired ----------------------------------------------------------


@pytest.mark.parametrize("provider", ["op-device", "op-device-public"])
def test_approved_signs_in_and_goes_to_the_callback_url(
    app: Flask, node_op: NodeOP, provider: str
) -> None:
    device = Device(app, provider)
    grants = node_op.grant_count(provider, DEVICE_GRANT)
    since = time.time()
    device.begin(callback_url="/account?tab=sessions")
    row = device.row()
    assert row is not None
    assert (row.provider, row.interval) == (provider, DEVICE_INTERVAL)
    assert row.callback_url == APP_ORIGIN + "/account?tab=sessions"
    assert timedelta(seconds=598) <= row.expires - row.created_at <= timedelta(seconds=600)

    # Not approved yet: a due poll is pending, and the page stays.
    device.due()
    assert heading(device.status()) == f"Enter the code at {NAMES[provider]}"
    assert answers_since(node_op, provider, since) == ["authorization_pending"]

    node_op.approve_device(str(device.user_code), "alice")
    device.due()
    done = device.status()
    assert done.status_code == 302
    assert done.headers["Location"] == APP_ORIGIN + "/account?tab=sessions"
    assert answers_since(node_op, provider, since) == ["authorization_pending", "tokens"]
    assert node_op.grant_count(provider, DEVICE_GRANT) == grants + 1

    # Signed in as the provider's alice, with the same rows a code-flow sign-in makes.
    body = device.session_json()
    assert (body["user"]["email"], body["user"]["name"]) == ("alice@example.com", "Alice")
    [user] = table(app, User)
    assert user.email == "alice@example.com" and user.email_verified is not None
    [account] = table(app, Account)
    assert (account.user_id, account.provider, account.provider_account_id, account.type) == (
        user.id,
        provider,
        "alice",
        "oidc",
    )
    assert account.access_token and account.refresh_token and account.id_token
    [session] = table(app, Session)
    assert (session.user_id, session.provider, session.provider_sub) == (user.id, provider, "alice")
    assert session.provider_sid is None  # the device grant's ID token has no sid
    # The ID token kept is the provider's, for this client, checked like a callback's.
    assert session.id_token == account.id_token
    claims = jwt.decode(str(session.id_token), node_op.op_key).claims
    assert (claims["iss"], claims["aud"], claims["sub"]) == (node_op.issuer, provider, "alice")
    assert "nonce" not in claims

    # The request is over: its row and cookie are gone; the code page sends a signed-in
    # browser home, and the provider is not polled again (that would revoke the tokens).
    assert table(app, DeviceRequest) == []
    assert device.cookie() is None
    again = device.status()
    assert again.status_code == 302 and again.headers["Location"] == APP_ORIGIN + "/"
    assert answers_since(node_op, provider, since) == ["authorization_pending", "tokens"]


def test_unsafe_callback_url_falls_back_to_home(app: Flask, node_op: NodeOP) -> None:
    device = Device(app)
    device.begin(callback_url="https://evil.example/steal")
    row = device.row()
    assert row is not None and row.callback_url == APP_ORIGIN + "/"
    node_op.approve_device(str(device.user_code))
    device.due()
    done = device.status()
    assert (done.status_code, done.headers["Location"]) == (302, APP_ORIGIN + "/")


def test_htmx_poll_is_sent_on_with_hx_redirect(app: Flask, node_op: NodeOP) -> None:
    device = Device(app)
    device.begin(callback_url="/account")
    node_op.approve_device(str(device.user_code))
    device.due()
    done = device.status(htmx=True)
    # A 302 would be followed by XHR and swapped into the fragment: htmx navigates instead.
    assert done.status_code == 204 and done.data == b""
    assert done.headers["HX-Redirect"] == APP_ORIGIN + "/account"
    assert device.session_json()["user"]["email"] == "alice@example.com"


@pytest.mark.parametrize("how", ["abort", "login-denied"])
@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_denied_is_access_denied_and_ends_the_request(
    app: Flask, node_op: NodeOP, how: str, htmx: bool
) -> None:
    device = Device(app)
    since = time.time()
    device.begin()
    if how == "abort":
        node_op.approve_device(str(device.user_code), approve=False)
    else:
        node_op.approve_device(str(device.user_code), "deny")
    device.due()
    answer = device.status(htmx=htmx)
    if htmx:
        assert answer.status_code == 204
        assert answer.headers["HX-Redirect"] == ERROR_URL + "AccessDenied"
    else:
        assert answer.status_code == 302
        assert answer.headers["Location"] == ERROR_URL + "AccessDenied"
    assert answers_since(node_op, "op-device", since) == ["access_denied"]
    error_page = device.client.get(ERROR_URL + "AccessDenied")
    assert error_page.status_code == 403
    assert heading(error_page) == "Access denied"

    assert table(app, DeviceRequest) == []
    assert device.cookie() is None
    assert table(app, User) == [] and table(app, Account) == []
    assert_signed_out(app, device)
    assert_no_code_in_progress(device, NAMES["op-device"])
    assert answers_since(node_op, "op-device", since) == ["access_denied"]


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_expired_at_the_provider_shows_the_expired_page(
    app: Flask, node_op: NodeOP, htmx: bool
) -> None:
    device = Device(app)
    since = time.time()
    device.begin(callback_url="/account")
    node_op.expire_device_code(str(device.user_code))
    device.due()
    page = device.status(htmx=htmx)
    assert page.status_code == 200
    assert heading(page) == "The code has expired"
    assert answers_since(node_op, "op-device", since) == ["expired_token"]
    assert "hx-get" not in page.text and 'http-equiv="refresh"' not in page.text
    if htmx:
        # The whole card is replaced (the code and the QR code go), not the status line.
        assert "<html" not in page.text
        assert page.text.lstrip().startswith('<div id="device-card"')
        assert page.headers["HX-Retarget"] == "#device-card"
        assert page.headers["HX-Reswap"] == "outerHTML"
    assert "<svg" not in page.text and str(device.user_code) not in page.text
    assert table(app, DeviceRequest) == []
    assert device.cookie() is None
    assert_signed_out(app, device)

    # "Get a new code" starts again, with a new code, going to the same place after.
    [form] = parse_forms(page.text)
    assert (form.method, form.action) == ("post", "/auth/device/op-device")
    assert form.fields["callbackUrl"] == APP_ORIGIN + "/account"
    again = device.client.post(form.action, data=form.fields)
    assert again.status_code == 303
    new = device.client.get(again.headers["Location"])
    assert heading(new) == f"Enter the code at {NAMES['op-device']}"
    assert user_code_of(new) != device.user_code
    [row] = table(app, DeviceRequest)
    assert row.user_code == user_code_of(new)
    assert row.callback_url == APP_ORIGIN + "/account"


def test_code_that_runs_out_while_waiting_shows_the_expired_page(
    app: Flask, node_op: NodeOP
) -> None:
    """op-device-short's codes live DEVICE_SHORT_TTL seconds, here as at the provider. A
    page still open when the code runs out must say so (and forget the request), not
    claim that this browser never started one."""
    device = Device(app, "op-device-short")
    since = time.time()
    device.begin()
    row = device.row()
    assert row is not None
    assert row.expires - row.created_at == timedelta(seconds=DEVICE_SHORT_TTL)
    time.sleep(max(0.0, (row.expires - datetime.now(UTC)).total_seconds() + 0.05))

    page = device.status()
    assert page.status_code == 200
    assert heading(page) == "The code has expired"
    assert table(app, DeviceRequest) == []
    # Our own clock said so: the provider was not asked.
    assert answers_since(node_op, "op-device-short", since) == []


# -- polling: slow_down, many tabs -----------------------------------------------------


def test_slow_down_grows_the_interval_and_the_next_poll_waits(app: Flask, node_op: NodeOP) -> None:
    """The provider answers slow_down to a poll sooner than it likes: here the test makes
    our schedule poll twice within its interval (``due`` twice); the answer is real."""
    device = Device(app)
    since = time.time()
    device.begin()
    device.due()
    assert heading(device.status()) == f"Enter the code at {NAMES['op-device']}"
    device.due()
    fragment = device.status(htmx=True)
    polls = polls_since(node_op, "op-device", since)
    assert [p["answer"] for p in polls] == ["authorization_pending", "slow_down"]

    slower = DEVICE_INTERVAL + DEVICE_SLOW_DOWN_INCREMENT
    assert f'hx-trigger="every {slower}s"' in fragment.text
    row = device.row()
    assert row is not None and row.interval == slower
    # The next poll is not due before the provider's new interval has passed since the
    # slow_down (it allows 100 ms of network jitter).
    assert row.next_poll_at.timestamp() >= polls[-1]["at"] + slower - 0.1
    assert row.next_poll_at.timestamp() <= time.time() + slower

    # Well past the old interval, the page answers from the row and polls nothing.
    deadline = time.monotonic() + DEVICE_INTERVAL + 0.3
    while time.monotonic() < deadline:
        assert heading(device.status()) == f"Enter the code at {NAMES['op-device']}"
        time.sleep(0.1)
    page = device.status()
    assert f'<meta http-equiv="refresh" content="{slower}">' in page.text
    assert len(polls_since(node_op, "op-device", since)) == 2


@pytest.mark.sqlite_too
def test_many_tabs_poll_the_provider_at_most_once_per_interval(app: Flask, node_op: NodeOP) -> None:
    """Five tabs of one browser (five clients, one cookie), polling hard in threads: the
    provider sees one poll per interval and never has to say slow_down; once approved,
    exactly one tab signs in and the tokens are fetched once."""
    first = Device(app)
    first.begin(callback_url="/account")
    cookie = first.cookie()
    assert cookie is not None
    tabs = [first] + [Device(app, client=app.test_client()) for _ in range(4)]
    for tab in tabs[1:]:
        tab.client.set_cookie(first.cookie_name, cookie)
        tab.user_code = first.user_code
    grants = node_op.grant_count("op-device", DEVICE_GRANT)

    def all_at_once(work: Callable[[Device], Any]) -> list[Any]:
        barrier = threading.Barrier(len(tabs))
        results: list[Any] = [None] * len(tabs)
        errors: list[BaseException] = []

        def run(index: int) -> None:
            try:
                barrier.wait(timeout=10)
                results[index] = work(tabs[index])
            except BaseException as exc:  # re-raised below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tabs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        if errors:
            raise errors[0]
        return results

    def hammer(tab: Device) -> list[int]:
        codes = []
        stop = time.monotonic() + 1.5
        while time.monotonic() < stop:
            codes.append(tab.status(htmx=True).status_code)
            time.sleep(0.03)
        return codes

    first.wait_until_due()
    since = time.time()
    codes = all_at_once(hammer)
    assert {c for tab_codes in codes for c in tab_codes} == {200}
    polls = polls_since(node_op, "op-device", since)
    assert [p["answer"] for p in polls] == ["authorization_pending"] * len(polls)
    # 1.5 s from a due poll: one at the start, one a second later; never two in a second.
    assert len(polls) == 2, polls
    assert polls[1]["at"] - polls[0]["at"] >= DEVICE_INTERVAL - 0.1

    node_op.approve_device(str(first.user_code))
    first.wait_until_due()
    since = time.time()
    answers = all_at_once(lambda tab: tab.status())
    redirects = [a for a in answers if a.status_code == 302]
    assert len(redirects) == 1
    assert redirects[0].headers["Location"] == APP_ORIGIN + "/account"
    # The others were not due: they still show the code (or, later, no code at all).
    others = {heading(a) for a in answers if a.status_code != 302}
    assert others <= {f"Enter the code at {NAMES['op-device']}", "No code in progress"}
    assert answers_since(node_op, "op-device", since) == ["tokens"]
    assert node_op.grant_count("op-device", DEVICE_GRANT) == grants + 1
    assert len(table(app, Session)) == 1 and table(app, DeviceRequest) == []

    # A tab that missed it: signed in (same browser) it goes home; a stale copy of the
    # cookie without the session sees no code in progress.
    winner = tabs[answers.index(redirects[0])]
    session_cookie = winner.client.get_cookie(SESSION_COOKIE)
    assert session_cookie is not None
    loser = tabs[(answers.index(redirects[0]) + 1) % len(tabs)]
    assert_no_code_in_progress(loser, NAMES["op-device"])
    loser.client.set_cookie(first.cookie_name, cookie)
    loser.client.set_cookie(SESSION_COOKIE, session_cookie.value)
    home = loser.status()
    assert (home.status_code, home.headers["Location"]) == (302, APP_ORIGIN + "/")
    assert answers_since(node_op, "op-device", since) == ["tokens"]


def test_pending_polls_that_are_not_due_write_nothing(
    app: Flask, node_op: NodeOP, count_sql: Any
) -> None:
    device = Device(app)
    device.begin()
    since = time.time()
    with count_sql() as sql:
        for _ in range(3):
            assert device.status(htmx=True).status_code == 200
    assert sql.writes == []
    assert polls_since(node_op, "op-device", since) == []


# -- what the browser holds -----------------------------------------------------------


def test_the_device_code_never_reaches_the_browser(
    app: Flask, node_op: NodeOP, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    device = Device(app)
    device._keep(device.client.get("/auth/device"))
    device.begin(callback_url="/account")
    row = device.row()
    assert row is not None and row.device_code
    device_code = row.device_code
    cookie = device.cookie()
    assert cookie is not None

    # At rest the device code is sealed, and the handle only hashed.
    with app.app_context():
        raw = db.session.execute(sa.text("SELECT device_code, handle_hash FROM device_requests"))
        [(sealed, handle_hash)] = raw.all()
    assert sealed and device_code not in sealed
    # The cookie is the sealed handle: it opens only for its purpose and provider, and its
    # hash names the row.
    with app.test_request_context():
        handle = sealed_cookies.open_sealed(cookie, purpose=HANDLE_PURPOSE, bound_to="op-device")
        other = sealed_cookies.open_sealed(
            cookie, purpose=HANDLE_PURPOSE, bound_to="op-device-public"
        )
    assert handle is not None and other is None
    assert hashlib.sha256(handle.encode()).hexdigest() == handle_hash
    assert handle not in cookie and handle_hash not in cookie

    device.status(htmx=True)
    device.due()
    device.status()
    node_op.approve_device(str(device.user_code))
    device.due()
    assert device.status().status_code == 302
    device._keep(device.client.get("/account"))
    device._keep(device.client.get("/auth/session"))

    assert len(device.responses) >= 9
    for response in device.responses:
        assert device_code not in response.get_data(as_text=True)
        for name, value in response.headers.items():
            assert device_code not in value, name
    assert caplog.records and all(device_code not in r.getMessage() for r in caplog.records)


def test_starting_again_replaces_the_old_request(app: Flask, node_op: NodeOP) -> None:
    elsewhere = Device(app)
    elsewhere.begin()
    device = Device(app)
    device.begin()
    old_code, old_cookie = device.user_code, device.cookie()
    old_row = device.row()
    assert old_row is not None and old_cookie is not None

    device.begin()
    assert device.user_code != old_code and device.cookie() != old_cookie
    rows = table(app, DeviceRequest)
    assert {r.user_code for r in rows} == {elsewhere.user_code, device.user_code}
    assert old_row.handle_hash not in {r.handle_hash for r in rows}

    # The old cookie finds nothing any more.
    stale = Device(app)
    stale.client.set_cookie(device.cookie_name, old_cookie)
    assert_no_code_in_progress(stale, NAMES["op-device"])
    # The other browser's request is untouched.
    assert heading(elsewhere.status()) == f"Enter the code at {NAMES['op-device']}"


def forged_cookies(app: Flask) -> dict[str, tuple[str, str]]:
    """Cookies that are not this browser's request for op-device: name -> (cookie name,
    value)."""
    other = Device(app, "op-device-public")
    other.begin()
    public_cookie = other.cookie()
    assert public_cookie is not None
    flipped = public_cookie[:20] + ("A" if public_cookie[20] != "A" else "B") + public_cookie[21:]
    with app.test_request_context():
        expired = sealed_cookies.seal("x", purpose=HANDLE_PURPOSE, bound_to="op-device", max_age=-5)
        unknown = sealed_cookies.seal("y", purpose=HANDLE_PURPOSE, bound_to="op-device", max_age=60)
        wrong_purpose = sealed_cookies.seal(
            "z", purpose="oauth-checks", bound_to="op-device", max_age=60
        )
    return {
        "random": ("auth.device.op-device", "x" * 120),
        "other provider's": ("auth.device.op-device", public_cookie),
        "tampered": ("auth.device.op-device", flipped),
        "expired": ("auth.device.op-device", expired),
        "unknown handle": ("auth.device.op-device", unknown),
        "other purpose": ("auth.device.op-device", wrong_purpose),
        # Over the 4 kB a browser keeps, as a proxy might still pass it on.
        "huge": ("auth.device.op-device", "A" * 9000),
    }


def test_status_without_this_browsers_request_shows_no_code(
    app: Flask, node_op: NodeOP, count_sql: Any
) -> None:
    cases = forged_cookies(app)
    rows_before = table(app, DeviceRequest)
    since = time.time()
    with count_sql() as sql:
        assert_no_code_in_progress(Device(app), NAMES["op-device"])
        for label, (name, value) in cases.items():
            device = Device(app)
            cookie = {"Cookie": f"{name}={value}"}
            page = device.client.get(device.status_url, headers=cookie)
            assert (page.status_code, heading(page)) == (200, "No code in progress"), label
            fragment = device.client.get(
                device.status_url, headers={**cookie, "HX-Request": "true"}
            )
            assert "No code in progress" in fragment.text and "hx-get" not in fragment.text
            assert fragment.headers["HX-Retarget"] == "#device-card"
    assert sql.writes == []
    assert [r.id for r in table(app, DeviceRequest)] == [r.id for r in rows_before]
    assert polls_since(node_op, "op-device", since) == []
    assert polls_since(node_op, "op-device-public", since) == []


# -- refusals before anything starts ---------------------------------------------------


@pytest.mark.parametrize("token", [None, "", "not-a-token"], ids=["none", "empty", "wrong"])
def test_start_without_csrf_is_refused(app: Flask, token: str | None) -> None:
    device = Device(app)
    answer = device.start(csrf=token)
    assert answer.status_code == 302
    assert answer.headers["Location"] == APP_ORIGIN + "/auth/signin?error=MissingCSRF"
    assert table(app, DeviceRequest) == []
    assert device.cookie() is None


def test_unknown_provider_or_device_flow_off_is_404(app: Flask, node_op: NodeOP) -> None:
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    for provider in ("nope", "op-basic", "email", "demo", "op-device%00", "a" * 300):
        started = client.post(f"/auth/device/{provider}", data={"csrfToken": csrf})
        assert started.status_code == 404, provider
        assert client.get(f"/auth/device/{provider}/status").status_code == 404, provider
    assert table(app, DeviceRequest) == []
    assert all(client.get_cookie(f"auth.device.{p}") is None for p in NAMES)
    # Starting is a POST only.
    assert client.get("/auth/device/op-device").status_code == 405


def test_provider_down_at_start_is_oauth_signin(make_oauth_app: Any) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    app = make_oauth_app(
        [
            {
                "id": "down",
                "type": "oidc",
                "name": "Down",
                "issuer": down,
                "client_id": "c",
                "client_secret": "s",
                "device_flow": True,
            }
        ]
    )
    device = Device(app, "down")
    answer = device.start()
    assert answer.status_code == 302
    assert answer.headers["Location"] == ERROR_URL + "OAuthSignin"
    shown = device.client.get(answer.headers["Location"])
    assert shown.headers["Location"] == APP_ORIGIN + "/auth/signin?error=OAuthSignin"
    assert table(app, DeviceRequest) == []
    assert device.cookie() is None


# -- answers only a fake provider gives --------------------------------------------------


def serve_device(
    fake: FakeIdP,
    answer: Any = None,
    *,
    status: int = 200,
    polls: list[Any] | None = None,
    **changes: Any,
) -> None:
    """Make ``fake`` a device flow provider: its device authorization endpoint answers
    ``answer`` (a body) or the defaults updated with ``changes`` (None drops a field);
    its token endpoint answers the device code grant with ``polls`` in turn: "pending",
    "tokens" (an ID token from ``fake.id_token``), or a (status, body) pair."""
    code = "fake-device-code-" + "d" * 20
    body = answer
    if body is None:
        body = {
            "device_code": code,
            "user_code": "WDJB-MJHT",
            "verification_uri": fake.issuer + "/device",
            "verification_uri_complete": fake.issuer + "/device?user_code=WDJB-MJHT",
            "expires_in": 600,
            "interval": 1,
            **changes,
        }
        body = {k: v for k, v in body.items() if v is not None}
    fake.discovery["device_authorization_endpoint"] = fake.issuer + "/device_authorization"
    fake.routes["/device_authorization"] = lambda request: (status, {}, body)
    queue = list(polls or [])

    def token(request: Any) -> tuple[int, dict[str, str], Any]:
        assert request.form.get("grant_type") == DEVICE_GRANT
        step = queue.pop(0) if queue else "pending"
        if step == "pending":
            return 400, {}, {"error": "authorization_pending"}
        if step == "tokens":
            tokens = {
                "access_token": "at-device",
                "token_type": "Bearer",
                "expires_in": 3600,
                "id_token": fake.id_token(None),
            }
            return 200, {}, tokens
        return step[0], {}, step[1]

    fake.routes["/token"] = token


@contextmanager
def fake_device_app(make_oauth_app: Any, **settings: Any) -> Iterator[tuple[FakeIdP, Flask]]:
    """A FakeIdP (as ``fake_idp``, but its server notices the shutdown within 20 ms instead
    of 500) and an app with it as the device flow provider "fake"."""
    fake = FakeIdP()
    thread = threading.Thread(
        target=fake.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield fake, make_oauth_app([fake.provider_config("fake", device_flow=True, **settings)])
    finally:
        fake.server.shutdown()
        fake.server.server_close()


HOSTILE_ANSWERS: dict[str, dict[str, Any]] = {
    "javascript: verification_uri": {"verification_uri": "javascript:alert(1)"},
    "data: verification_uri": {"verification_uri": "data:text/html,<script>alert(1)</script>"},
    "http verification_uri off loopback": {"verification_uri": "http://evil.example/device"},
    "javascript: verification_uri_complete": {"verification_uri_complete": "javascript:alert(1)"},
    "verification_uri not a string": {"verification_uri": ["https://a.example/"]},
    "verification_uri too long": {"verification_uri": "https://a.example/" + "x" * 2100},
    "no user_code": {"user_code": None},
    "empty user_code": {"user_code": ""},
    "user_code too long": {"user_code": "A" * 65},
    "user_code a number": {"user_code": 12345678},
    "no device_code": {"device_code": None},
    "device_code too long": {"device_code": "d" * 5000},
    "device_code an object": {"device_code": {"a": 1}},
    "no verification_uri": {"verification_uri": None},
    "no expires_in": {"expires_in": None},
    "expires_in zero": {"expires_in": 0},
    "expires_in negative": {"expires_in": -600},
    "expires_in a string": {"expires_in": "600"},
    "interval zero": {"interval": 0},
    "interval negative": {"interval": -1},
    "interval true": {"interval": True},
    "interval a float": {"interval": 1.5},
    "interval a string": {"interval": "5"},
}


@pytest.mark.parametrize("change", HOSTILE_ANSWERS.values(), ids=HOSTILE_ANSWERS.keys())
def test_hostile_device_authorization_is_refused(make_oauth_app: Any, change: Any) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, **change)
        device = Device(app, "fake")
        answer = device.start()
        assert answer.status_code == 302
        assert answer.headers["Location"] == ERROR_URL + "OAuthSignin"
        assert fake.hits["/device_authorization"] == 1
        assert table(app, DeviceRequest) == []
        assert device.cookie() is None


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b"not json"),
        (200, ["device_code"]),
        (400, {"error": "invalid_client"}),
        (500, {"device_code": "x", "user_code": "y"}),
    ],
    ids=["not-json", "array", "oauth-error", "http-500"],
)
def test_unusable_device_authorization_is_refused(
    make_oauth_app: Any, status: int, body: Any
) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, body, status=status)
        device = Device(app, "fake")
        answer = device.start()
        assert answer.headers["Location"] == ERROR_URL + "OAuthSignin"
        assert table(app, DeviceRequest) == [] and device.cookie() is None


def test_provider_without_device_endpoint_is_oauth_signin(make_oauth_app: Any) -> None:
    with fake_device_app(make_oauth_app) as (_fake, app):
        device = Device(app, "fake")
        assert device.start().headers["Location"] == ERROR_URL + "OAuthSignin"
        assert table(app, DeviceRequest) == []


def test_huge_lifetime_and_interval_are_bounded(make_oauth_app: Any) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, expires_in=10**12, interval=10**9)
        device = Device(app, "fake")
        started = device.start()
        assert started.status_code == 303
        [row] = table(app, DeviceRequest)
        assert row.expires - row.created_at == timedelta(seconds=device_flow.MAX_LIFETIME)
        assert row.interval == device_flow.MAX_INTERVAL
        assert row.next_poll_at - row.created_at == timedelta(seconds=device_flow.MAX_INTERVAL)
        max_age = device_flow.MAX_LIFETIME + device_flow.HANDLE_GRACE
        assert f"Max-Age={max_age};" in started.headers["Set-Cookie"]
        page = device.status()
        assert f'hx-trigger="every {device_flow.MAX_INTERVAL}s"' in page.text
        assert "The code expires in 29 minutes." in page.text


def test_no_interval_is_five_seconds_and_no_complete_uri_no_qr(make_oauth_app: Any) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, interval=None, verification_uri_complete=None)
        device = Device(app, "fake")
        assert device.start().status_code == 303
        [row] = table(app, DeviceRequest)
        assert row.interval == device_flow.DEFAULT_INTERVAL == 5
        assert row.verification_uri_complete is None
        page = device.status()
        assert "<svg" not in page.text and user_code_of(page) == "WDJB-MJHT"


def test_provider_text_is_shown_escaped(make_oauth_app: Any) -> None:
    """What the provider sends is text on the page, never markup; its links stay links."""
    hostile_code = '<img src=x onerror="alert(1)">'
    link = 'https://phish.example/x"><script>alert(2)</script>'
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, user_code=hostile_code, verification_uri=link)
        device = Device(app, "fake")
        assert device.start().status_code == 303
        page = device.status()
        assert "<img src=x" not in page.text and "<script>alert(2)" not in page.text
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page.text
        assert 'href="https://phish.example/x&#34;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"' in (
            page.text
        )


def test_fake_provider_device_sign_in_works(make_oauth_app: Any) -> None:
    """The control for the ID token cases below: the fake's good answers sign in."""
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, polls=["pending", "tokens"])
        device = Device(app, "fake")
        assert device.start().status_code == 303
        device.user_code = "WDJB-MJHT"
        device.due()
        assert heading(device.status()) == "Enter the code at Fake"
        device.due()
        done = device.status()
        assert (done.status_code, done.headers["Location"]) == (302, APP_ORIGIN + "/")
        assert device.session_json()["user"]["email"] == "fay@example.com"
        assert fake.hits["/token"] == 2 and fake.hits["/userinfo"] == 1


def _other_key(fake: FakeIdP) -> None:
    fake.sign_key = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid


def _unsigned(fake: FakeIdP) -> None:
    """Answer the poll with an unsigned ID token (alg "none", which joserfc will not make)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": fake.issuer, "sub": "user-1", "aud": fake.client_id, "iat": now,
              "exp": now + 300}  # fmt: skip
    tokens = {
        "access_token": "at-x",
        "token_type": "Bearer",
        "id_token": f"{part({'alg': 'none'})}.{part(claims)}.",
    }
    fake.routes["/token"] = lambda request: (200, {}, tokens)


def _without_id_token(fake: FakeIdP) -> None:
    """Answer the poll with a plain token response, as django-oauth-toolkit's device grant
    does."""
    tokens = {"access_token": "at-x", "token_type": "Bearer"}
    fake.routes["/token"] = lambda request: (200, {}, tokens)


def test_without_an_id_token_userinfo_names_the_person(make_oauth_app: Any) -> None:
    """No specification promises an ID token from the device grant (django-oauth-toolkit
    sends none): the identity then comes from userinfo, asked with the access token."""
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, polls=["tokens"])
        _without_id_token(fake)
        device = Device(app, "fake")
        assert device.start().status_code == 303
        device.user_code = "WDJB-MJHT"
        device.due()
        done = device.status()
        assert (done.status_code, done.headers["Location"]) == (302, APP_ORIGIN + "/")
        assert device.session_json()["user"]["email"] == "fay@example.com"
        assert fake.hits["/userinfo"] == 1
        accounts = [(a.provider, a.provider_account_id) for a in table(app, Account)]
        assert accounts == [("fake", "user-1")]
        # A logout token naming the person reaches this session (no sid: no ID token).
        sessions = [(s.provider, s.provider_sub, s.provider_sid) for s in table(app, Session)]
        assert sessions == [("fake", "user-1", None)]


ID_TOKEN_CASES: dict[str, Callable[[FakeIdP], Any]] = {
    "wrong audience": lambda f: f.claims.update(aud="someone-else"),
    "wrong issuer": lambda f: f.claims.update(iss="https://evil.example"),
    "expired": lambda f: f.claims.update(exp=int(time.time()) - 3600, iat=int(time.time()) - 7200),
    "issued in the future": lambda f: f.claims.update(iat=int(time.time()) + 3600),
    "no sub": lambda f: f.claims.update(sub=None),
    "signed with another key": _other_key,
    "alg none": _unsigned,
    "no id_token, userinfo without sub": lambda f: (
        _without_id_token(f),
        f.userinfo.pop("sub") if f.userinfo else None,
    ),
    "no id_token, no userinfo endpoint": lambda f: (
        _without_id_token(f),
        f.discovery.pop("userinfo_endpoint"),
    ),
    "userinfo of someone else": lambda f: f.userinfo.update(sub="user-2"),
}


@pytest.mark.parametrize(("case", "spoil"), ID_TOKEN_CASES.items(), ids=ID_TOKEN_CASES.keys())
def test_id_token_is_checked_like_a_callback(make_oauth_app: Any, case: str, spoil: Any) -> None:
    """Each spoils one thing in the fake's answer (test_fake_provider_device_sign_in_works
    is the unspoiled control)."""
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, polls=["tokens"])
        spoil(fake)
        device = Device(app, "fake")
        assert device.start().status_code == 303
        device.user_code = "WDJB-MJHT"
        device.due()
        answer = device.status()
        assert answer.status_code == 302
        # An unsigned ID token says the client's settings at the provider are wrong.
        code = "Configuration" if case == "alg none" else "OAuthCallback"
        assert answer.headers["Location"] == ERROR_URL + code
        assert fake.hits["/token"] == 1
        assert table(app, User) == [] and table(app, Account) == []
        assert_signed_out(app, device)
        # The code is spent: nothing polls it again, the page shows no code in progress.
        assert_no_code_in_progress(device, "Fake")
        assert fake.hits["/token"] == 1


def test_refused_sign_in_after_approval_leaves_no_request_row(make_oauth_app: Any) -> None:
    """Once the provider has handed out the tokens the request is over, whatever the
    sign-in makes of them: as for a denial, its row goes (it does not linger, code-less,
    until `flask auth cleanup`), though the sign-in's own writes are discarded."""
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, polls=["tokens"])
        fake.claims["aud"] = "someone-else"
        device = Device(app, "fake")
        assert device.start().status_code == 303
        device.user_code = "WDJB-MJHT"
        device.due()
        assert device.status().headers["Location"] == ERROR_URL + "OAuthCallback"
        assert table(app, DeviceRequest) == []


@pytest.mark.parametrize(
    ("poll", "shown"),
    [
        ((400, {"error": "invalid_grant"}), "The code has expired"),
        ((400, {"error": "expired_token"}), "The code has expired"),
        ((400, {"error": "invalid_client"}), "The code has expired"),
        ((500, b"<html>oops</html>"), "Enter the code at Fake"),
        ((200, {"token_type": "Bearer"}), "Enter the code at Fake"),
    ],
    ids=["invalid_grant", "expired_token", "other-error", "http-500", "no-access-token"],
)
def test_token_endpoint_answers(make_oauth_app: Any, poll: Any, shown: str) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, polls=[poll])
        device = Device(app, "fake")
        assert device.start().status_code == 303
        device.user_code = "WDJB-MJHT"
        device.due()
        page = device.status()
        assert (page.status_code, heading(page)) == (200, shown)
        assert table(app, Session) == []
        if shown == "The code has expired":
            assert table(app, DeviceRequest) == [] and device.cookie() is None
        else:
            # The provider is down for now: the page says so and polls on, not sooner.
            assert "Fake is not answering just now; we keep trying." in page.text
            row = device.row()
            assert row is not None and row.device_code
            assert row.next_poll_at > datetime.now(UTC)
            assert "Fake is not answering" not in device.status().text
            assert fake.hits["/token"] == 1


# -- the account rules ------------------------------------------------------------------


def test_unverified_address_does_not_reach_its_verified_owner(
    app: Flask, node_op: NodeOP, user_factory: Any
) -> None:
    """mallory at the provider claims ann@ without verifying it: a new user, never Ann's."""
    ann_id = user_factory(app, email=ANN, email_verified=datetime.now(UTC), name="Ann")
    device = Device(app)
    device.begin()
    node_op.approve_device(str(device.user_code), "mallory")
    device.due()
    assert device.status().status_code == 302
    [account] = table(app, Account)
    assert account.provider_account_id == "mallory" and account.user_id != ann_id
    mallory = next(u for u in table(app, User) if u.id == account.user_id)
    assert (mallory.email, mallory.email_verified) == (ANN, None)
    [session] = table(app, Session)
    assert session.user_id == mallory.id
    body = device.session_json()
    assert body["user"]["name"] == "Mallory"


def test_verified_address_owned_by_another_user_is_not_linked(
    app: Flask, node_op: NodeOP, user_factory: Any
) -> None:
    """ann at the provider (verified) while the app's Ann owns the address: without
    allow_dangerous_email_account_linking that is OAuthAccountNotLinked, as in a callback."""
    user_factory(app, email=ANN, email_verified=datetime.now(UTC))
    device = Device(app)
    device.begin()
    node_op.approve_device(str(device.user_code), "ann")
    device.due()
    answer = device.status()
    assert answer.headers["Location"] == ERROR_URL + "OAuthAccountNotLinked"
    assert table(app, Account) == []
    assert_signed_out(app, device)
    assert len(table(app, User)) == 1


def test_linking_to_a_signed_in_user_needs_a_recent_sign_in(
    app: Flask, node_op: NodeOP, user_factory: Any, session_factory: Any
) -> None:
    """Signed in, a device sign-in with a new identity links it to the signed-in user, as a
    callback would, and only if that session is recent; otherwise the person is sent to
    confirm it is them first, and nothing is linked."""
    zed = user_factory(app, email="zed@example.com", email_verified=datetime.now(UTC))
    old = session_factory(app, zed, created_at=datetime.now(UTC) - timedelta(hours=1))
    device = Device(app)
    device.client.set_cookie(SESSION_COOKIE, old.token)
    device.begin()
    node_op.approve_device(str(device.user_code), "alice")
    device.due()
    answer = device.status()
    assert answer.status_code == 302
    assert answer.headers["Location"] == (
        APP_ORIGIN + "/account/confirm?next=%2Faccount%2Flink%2Fop-device"
    )
    assert table(app, Account) == []
    assert [s.id for s in table(app, Session)] == [old.id]
    assert table(app, DeviceRequest) == []  # the code is spent either way

    recent = session_factory(app, zed)
    device = Device(app)
    device.client.set_cookie(SESSION_COOKIE, recent.token)
    device.begin(callback_url="/account")
    node_op.approve_device(str(device.user_code), "alice")
    device.due()
    answer = device.status()
    assert answer.headers["Location"] == APP_ORIGIN + "/account"
    [account] = table(app, Account)
    assert (account.user_id, account.provider, account.provider_account_id) == (
        zed,
        "op-device",
        "alice",
    )
    assert device.session_json()["user"]["email"] == "zed@example.com"


# -- flask auth device-login ---------------------------------------------------------------


@pytest.fixture
def login_cli(app: Flask, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``login_cli(args, at_provider)``: run ``flask auth device-login``; ``at_provider``
    is called with the user code in a thread as soon as the command starts waiting (the
    person at the phone). The wrapper only hands the code over: the real
    ``wait_for_approval`` polls the real provider."""
    from webapp import cli

    real = cli.wait_for_approval

    def run(args: list[str], at_provider: Callable[[str], None] | None = None) -> Any:
        errors: list[BaseException] = []

        def waiting(client: Any, code: Any, **kwargs: Any) -> Any:
            if at_provider is None:
                return real(client, code, **kwargs)

            def act() -> None:
                try:
                    at_provider(code.user_code)
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=act)
            thread.start()
            try:
                return real(client, code, **kwargs)
            finally:
                thread.join(timeout=30)

        monkeypatch.setattr(cli, "wait_for_approval", waiting)
        result = app.test_cli_runner().invoke(args=["auth", "device-login", *args])
        if errors:
            raise errors[0]
        return result

    return run


def test_cli_device_login_signs_in(app: Flask, node_op: NodeOP, login_cli: Any) -> None:
    since = time.time()

    def approve_after_a_pending_poll(user_code: str) -> None:
        deadline = time.monotonic() + 10
        while not polls_since(node_op, "op-device", since):
            assert time.monotonic() < deadline, "the command never polled"
            time.sleep(0.05)
        node_op.approve_device(user_code, "alice")

    result = login_cli(["op-device", "--qr", "--print-cookie"], approve_after_a_pending_poll)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    code = re.search(r"enter the code (\S+)$", lines[0])
    assert code and lines[0] == f"Go to {node_op.issuer}/device and enter the code {code[1]}"
    assert lines[1] == f"or open {node_op.issuer}/device?user_code={code[1]}"
    assert "█" in result.output or "▀" in result.output  # the QR code, drawn in the terminal
    assert "Waiting for approval (the code expires in 600 s)..." in lines
    assert answers_since(node_op, "op-device", since) == ["authorization_pending", "tokens"]

    signed_in = re.search(r"^Signed in: session (\d+) of user (\d+)$", result.output, re.M)
    assert signed_in, result.output
    [session] = table(app, Session)
    [user] = table(app, User)
    assert (session.id, session.user_id) == (int(signed_in[1]), int(signed_in[2]))
    assert (user.id, user.email) == (session.user_id, "alice@example.com")
    assert (session.provider, session.provider_sub) == ("op-device", "alice")
    assert session.user_agent == "flask auth device-login"
    assert table(app, DeviceRequest) == []  # the terminal's sign-in keeps no row

    cookie = re.search(rf"^{SESSION_COOKIE}=(\S+)$", result.output, re.M)
    assert cookie, result.output
    browser = app.test_client()
    browser.set_cookie(SESSION_COOKIE, cookie[1])
    assert browser.get("/auth/session").json["user"]["email"] == "alice@example.com"


def test_cli_without_print_cookie_prints_no_secret(
    app: Flask, node_op: NodeOP, login_cli: Any
) -> None:
    result = login_cli(["op-device-public"], lambda code: node_op.approve_device(code, "carol"))
    assert result.exit_code == 0, result.output
    assert "Signed in: session" in result.output
    assert SESSION_COOKIE not in result.output
    assert "█" not in result.output and "▀" not in result.output


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("deny", "Error: sign-in refused: AccessDenied"),
        ("expire", "Error: the code expired before it was approved"),
    ],
)
def test_cli_denied_or_expired_fails_clearly(
    app: Flask, node_op: NodeOP, login_cli: Any, what: str, message: str
) -> None:
    def at_provider(code: str) -> None:
        if what == "deny":
            node_op.approve_device(code, approve=False)
        else:
            node_op.expire_device_code(code)

    result = login_cli(["op-device"], at_provider)
    assert result.exit_code == 1
    assert message in result.output
    assert "Signed in" not in result.output
    assert table(app, Session) == [] and table(app, User) == []


def test_cli_tells_of_the_new_user_and_account_once_committed(
    app: Flask, node_op: NodeOP, login_cli: Any
) -> None:
    with hearing_of_new_rows(app) as heard:
        result = login_cli(["op-device"], lambda code: node_op.approve_device(code, "alice"))
    assert result.exit_code == 0, result.output
    assert heard == [("user_created", 1), ("account_linked", 1)]


def test_cli_sign_in_the_hook_refuses_tells_of_no_user_or_account(
    app: Flask, node_op: NodeOP, login_cli: Any
) -> None:
    app.extensions["webapp.hooks"].signin = lambda **_: False
    with hearing_of_new_rows(app) as heard:
        result = login_cli(["op-device"], lambda code: node_op.approve_device(code, "alice"))
    assert result.exit_code == 1
    assert "Error: sign-in refused: AccessDenied" in result.output
    assert heard == []
    assert table(app, User) == [] and table(app, Account) == []


def test_cli_refuses_providers_without_device_flow(app: Flask, login_cli: Any) -> None:
    for provider in ("nope", "op-basic"):
        result = login_cli([provider])
        assert result.exit_code == 1
        assert f"Error: {provider} does not offer device sign-in" in result.output


def test_cli_provider_down(make_oauth_app: Any) -> None:
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake, status=503, answer={"error": "temporarily_unavailable"})
        result = app.test_cli_runner().invoke(args=["auth", "device-login", "fake"])
        assert result.exit_code == 1
        assert "Error: fake did not answer usably (OAuthSignin)" in result.output


def test_wait_for_approval_slows_down_when_told(app: Flask, node_op: NodeOP) -> None:
    """The terminal's poller against the real provider, with its sleeps recorded instead of
    slept: polling back to back, it is told slow_down and adds 5 s each time."""
    slept: list[float] = []
    with app.app_context():
        client, code = device_flow.request_device_code("op-device")

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if len(slept) == 4:
                node_op.approve_device(code.user_code)

        since = time.time()
        token = device_flow.wait_for_approval(client, code, sleep=sleep)
    step = DEVICE_SLOW_DOWN_INCREMENT
    assert answers_since(node_op, "op-device", since) == [
        "authorization_pending",
        "slow_down",
        "slow_down",
        "tokens",
    ]
    assert slept == [
        DEVICE_INTERVAL,
        DEVICE_INTERVAL,
        DEVICE_INTERVAL + step,
        DEVICE_INTERVAL + 2 * step,
    ]
    assert isinstance(token["access_token"], str) and token["id_token"]


@pytest.mark.sqlite_too
def test_a_slow_provider_never_has_two_polls_of_one_code_in_flight(make_oauth_app: Any) -> None:
    """The provider takes 1.5 s to answer at a 1 s interval: tabs polling all the while
    still never have two polls of the code at the provider at once (a provider revokes
    the tokens of a code polled again after they were issued)."""
    with fake_device_app(make_oauth_app) as (fake, app):
        serve_device(fake)
        slow_pending = fake.routes["/token"]
        in_flight, most = 0, 0
        lock = threading.Lock()

        def token(request: Any) -> tuple[int, dict[str, str], Any]:
            nonlocal in_flight, most
            with lock:
                in_flight += 1
                most = max(most, in_flight)
            try:
                time.sleep(1.5)
                return slow_pending(request)
            finally:
                with lock:
                    in_flight -= 1

        fake.routes["/token"] = token
        first = Device(app, "fake")
        assert first.start().status_code == 303
        first.user_code = "WDJB-MJHT"  # serve_device's
        tabs = [first] + [Device(app, "fake", client=app.test_client()) for _ in range(2)]
        for tab in tabs[1:]:
            tab.client.set_cookie(first.cookie_name, str(first.cookie()))
        first.due()

        def poll_for_a_while(tab: Device) -> None:
            stop = time.monotonic() + 4
            while time.monotonic() < stop:
                assert tab.status(htmx=True).status_code == 200
                time.sleep(0.05)

        threads = [threading.Thread(target=poll_for_a_while, args=(t,)) for t in tabs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        polls = fake.hits["/token"]
    assert most == 1
    # One poll at a time, each 1 s after the last answer: two or three in 4 s, not more.
    assert 2 <= polls <= 3, polls
