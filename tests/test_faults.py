"""The fault suite (issue 14): the app's neighbours fail, and every answer still comes in
bounded time, says what happened, and leaves nothing half-written.

1. PostgreSQL restarted under load, lost while a sign-in mail is being sent, and stopped
   for good: a private cluster (Debian's pg_createcluster, never the shared server on
   5432) behind the production server (granian, deploy/serve.py). Every answer is a
   success or a clear 503 with Retry-After, within the connect timeout plus slack; the
   same worker serves again once the database is back; an e-mail request that succeeded
   has its token row, one that failed has none. (tests/test_resilience.py covers an
   unreachable database and a dropped pooled connection in process.)
2. SMTP refusing, hanging up, stalling, not listening, or dropping connection attempts:
   ``POST /auth/signin/email`` answers EmailSignin (redirect and JSON) within
   EMAIL_TIMEOUT plus slack, no verification token row stays, and the next request to a
   healthy server works; requests waiting on one stalled server at once each cost one
   timeout.
3. The identity provider's discovery, JWKS, token and userinfo endpoints refusing,
   dropping connection attempts, stalling, answering 500, or answering garbage: OAuthSignin
   or OAuthCallback within the provider timeouts plus slack, no user, account or session
   row; sign-ins waiting on one stalled provider at once each cost one timeout; and under
   the production server a request stuck on a provider does not hold up other people's
   session reads.

Bounds are derived from the app's own timeouts, plus ``SLACK`` for the request's own work
on a shared 2-core machine. A stall's answer must also take at least its timeout (less a
little): it shows the stall was reached and the timeout is what ended it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp import create_app
from webapp.sessions.store import hash_token, new_token
from webapp.storage.database import engine_options
from webapp.storage.db import db
from webapp.storage.models import Account, Session, User, VerificationToken
from webapp.web.error_answers import RETRY_AFTER

from .support.config import IN_CI, base_config
from .support.databases import migrate_database
from .support.faults import BrokenHTTP, FaultySmtp, PrivateCluster, syn_dropping_port
from .support.oauth import Browser, FakeIdP, fake_idp, follow_to_app, write_providers_toml
from .support.rows import read_rows, row_count
from .support.servers import Server, free_port, run_server

#: What a request may take beyond the waits the app allows itself (a timeout toward a
#: neighbour): its own work is milliseconds, but this machine has 2 cores shared with
#: other test runs, a restarting PostgreSQL and the load threads. Far below any hang
#: (the production server's graceful stop waits 20 s for a request).
SLACK = 2.5

#: The app's connect timeout toward PostgreSQL (database.engine_options: not a setting).
DB_CONNECT_TIMEOUT = float(
    engine_options("postgresql+psycopg://db.invalid/app")["connect_args"]["connect_timeout"]
)
#: During an outage a request may wait for one connection attempt at most.
DB_BOUND = DB_CONNECT_TIMEOUT + SLACK
#: How long after PostgreSQL is back the app must serve successes again: the Retry-After
#: it gives clients during the outage.
RECOVERY = float(RETRY_AFTER)

#: EMAIL_TIMEOUT for these tests (the default 10 s would make the suite slow); it bounds
#: the connection and each SMTP reply, so one stall costs one timeout.
EMAIL_TIMEOUT = 1.0
SMTP_BOUND = EMAIL_TIMEOUT + SLACK
#: Throttles out of the way: these tests count deliveries, not limits.
NO_EMAIL_LIMITS = {
    "EMAIL_IP_LIMIT": "100000/1m",
    "EMAIL_ADDRESS_IP_LIMIT": "100000/1m",
    "EMAIL_ADDRESS_LIMIT": "100000/1m",
}

#: AUTH_HTTP_CONNECT_TIMEOUT and AUTH_HTTP_READ_TIMEOUT for these tests (defaults 5 s and
#: 10 s). A call to a provider costs at most both; a callback fails at its first bad call.
HTTP_CONNECT_TIMEOUT = 1.0
HTTP_READ_TIMEOUT = 1.0
HTTP_TIMEOUTS = {
    "AUTH_HTTP_CONNECT_TIMEOUT": str(HTTP_CONNECT_TIMEOUT),
    "AUTH_HTTP_READ_TIMEOUT": str(HTTP_READ_TIMEOUT),
}
PROVIDER_BOUND = HTTP_CONNECT_TIMEOUT + HTTP_READ_TIMEOUT + SLACK

#: A stall's answer must take at least this share of the timeout that ends it.
STALL_FLOOR = 0.9
#: Requests waiting on one stalled neighbour at the same time: a worker's threads
#: (deploy/serve.py, WEB_THREADS).
CROWD = 4


def unique_address(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


# =========================================================================================
# 1. PostgreSQL restarted, lost mid-request, stopped for good (the production server, a
#    private cluster)
# =========================================================================================


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A PostgreSQL cluster of this module's own, dropped at the end (even on failure)."""
    with ExitStack() as stack:
        try:
            made = stack.enter_context(PrivateCluster.running())
        except (OSError, RuntimeError) as exc:
            message = f"cannot run a private PostgreSQL cluster: {exc}"
            if IN_CI:
                pytest.fail(message + " (CI=true: that is a failure)", pytrace=False)
            pytest.skip(message)
        yield made


@pytest.fixture(scope="module")
def smtp_server() -> Iterator[FaultySmtp]:
    server = FaultySmtp().start()
    yield server
    server.stop()


@pytest.fixture
def smtp(smtp_server: FaultySmtp) -> Iterator[FaultySmtp]:
    """The module's SMTP server, healthy and empty at the start and end of each test."""
    smtp_server.reset()
    yield smtp_server
    smtp_server.reset()


@dataclass
class Served:
    """The production server on the private cluster, and a signed-in person's cookie."""

    server: Server
    cluster: PrivateCluster
    database: str
    email: str
    cookie: str

    def rows(self, sql: str, **params: Any) -> list[Any]:
        return read_rows(self.database, sql, **params)


@pytest.fixture(scope="module")
def served(
    cluster: PrivateCluster, smtp_server: FaultySmtp, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    admin = sa.create_engine(
        cluster.url(), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
    )
    with admin.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE webapp"))
    admin.dispose()
    database = cluster.url("webapp")
    migrate_database(database)
    email, token = "pat@example.com", new_token()
    app = create_app(base_config(database), environ={})
    add_signed_in_user(app, email, token)
    with app.app_context():
        db.engine.dispose()
    with run_server(
        tmp_path_factory.mktemp("server-pg"),
        database=database,
        EMAIL_SERVER=smtp_server.url(),
        **NO_EMAIL_LIMITS,
    ) as server:
        yield Served(server, cluster, database, email, token)


@pytest.fixture
def pg_up(served: Served) -> Served:
    """The cluster running and the app serving the signed-in session (a test before may
    have stopped it)."""
    if not served.cluster.is_running():
        served.cluster.start()
    wait_until_serving(served, RECOVERY + DB_BOUND)
    return served


def wait_until_serving(served: Served, within: float) -> None:
    deadline = time.monotonic() + within
    with requests.Session() as browser:
        while True:
            answer = call(served, browser, "session")
            if judge(answer, served) == "ok":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the app does not serve again: {describe(answer)}")
            time.sleep(0.2)


@dataclass
class Answer:
    """One request made during a fault, and what came back (or why nothing did)."""

    kind: str
    started: float
    elapsed: float = 0.0
    status: int | None = None
    headers: Any = None
    body: str = ""
    error: str | None = None
    address: str | None = None
    json_mode: bool = False


#: The requests the load makes: a signed-in session read (JSON), a signed-in page, and an
#: e-mail sign-in request in each answer mode (a form's redirect, or Auth.js's JSON).
KINDS = ("session", "account", "email", "email-json")
#: Those whose caller wants JSON (the others are a browser's page and form).
JSON_KINDS = ("session", "email-json")


def call(served: Served, browser: requests.Session, kind: str) -> Answer:
    url = served.server.url
    answer = Answer(kind, time.monotonic(), json_mode=kind == "email-json")
    headers = {"Cookie": f"auth.session-token={served.cookie}"}
    # A client timeout well past the bound, so a hang shows as a late answer or none.
    limit = DB_BOUND + 10
    try:
        if kind == "session":
            r = browser.get(f"{url}/auth/session", headers=headers, timeout=limit)
        elif kind == "account":
            r = browser.get(
                f"{url}/account", headers={**headers, "Accept": "text/html"}, timeout=limit
            )
        else:
            # The CSRF token needs no database; a browser fetches it with the form.
            csrf = browser.get(f"{url}/auth/csrf", timeout=limit).json()["csrfToken"]
            answer.address = unique_address("load")
            data = {"csrfToken": csrf, "email": answer.address}
            if answer.json_mode:
                data["json"] = "true"
            answer.started = time.monotonic()
            r = browser.post(
                f"{url}/auth/signin/email", data=data, allow_redirects=False, timeout=limit
            )
    except (requests.RequestException, ValueError, KeyError) as exc:
        answer.elapsed = time.monotonic() - answer.started
        answer.error = f"{type(exc).__name__}: {exc}"
        return answer
    answer.elapsed = time.monotonic() - answer.started
    answer.status, answer.headers, answer.body = r.status_code, r.headers, r.text
    return answer


def describe(answer: Answer) -> str:
    if answer.error:
        return f"{answer.kind}: no answer after {answer.elapsed:.2f}s ({answer.error})"
    location = answer.headers.get("Location", "") if answer.headers is not None else ""
    return (
        f"{answer.kind}: {answer.status} after {answer.elapsed:.2f}s {location} "
        f"{answer.body[:160]!r}"
    )


def judge(answer: Answer, served: Served) -> str:
    """``ok`` (the request did what it asked), ``unavailable`` (a proper 503), or what is
    wrong with the answer."""
    if answer.error:
        return "no answer"
    if answer.elapsed > DB_BOUND:
        return f"answered after {answer.elapsed:.1f}s, beyond {DB_BOUND:.1f}s"
    if answer.status == 503:
        problem = unavailable_problem(answer, served, as_json=answer.kind in JSON_KINDS)
        return problem or "unavailable"
    if answer.kind == "session":
        body = _json(answer.body)
        user = body.get("user") if isinstance(body, dict) else None
        good = answer.status == 200 and isinstance(user, dict) and user.get("email") == served.email
        return "ok" if good else "not the signed-in session (signed out, or an error)"
    if answer.kind == "account":
        good = answer.status == 200 and served.email in answer.body
        return "ok" if good else "not the account page"
    # An e-mail sign-in request: on to verify-request, as a redirect or as JSON.
    if answer.json_mode:
        body = _json(answer.body)
        target = body.get("url", "") if answer.status == 200 and isinstance(body, dict) else ""
    else:
        target = answer.headers.get("Location", "") if answer.status == 302 else ""
    return "ok" if urlsplit(target).path == "/auth/verify-request" else "not verify-request"


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def unavailable_problem(answer: Answer, served: Served, *, as_json: bool) -> str | None:
    """What makes a 503 less than clear (None: it is a proper ServiceUnavailable)."""
    if answer.headers.get("Retry-After") != str(RETRY_AFTER):
        return f"503 with Retry-After {answer.headers.get('Retry-After')!r}"
    request_id = answer.headers.get("X-Request-ID")
    if not request_id:
        return "503 without X-Request-ID"
    if as_json:
        expected = {"error": "ServiceUnavailable", "requestId": request_id}
        if answer.json_mode:
            # An Auth.js client in JSON mode follows ``url`` from every answer, errors
            # included (docs/routes.md): the error page for this one.
            expected["url"] = f"{served.server.url}/auth/error?error=ServiceUnavailable"
        if _json(answer.body) != expected:
            return "503 without the ServiceUnavailable JSON"
        return None
    if not answer.headers.get("Content-Type", "").startswith("text/html"):
        return "503 page that is not HTML"
    if request_id not in answer.body or "<h1" not in answer.body:
        return "503 page without a title or the request's reference"
    leaks = ("Traceback", "psycopg", "OperationalError", f":{served.cluster.port}")
    if any(leak in answer.body for leak in leaks):
        return "503 page showing internals"
    return None


class Load:
    """One thread per kind of request, each looping until stopped; every answer kept."""

    def __init__(self, served: Served, kinds: tuple[str, ...] = KINDS) -> None:
        self.served = served
        self.kinds = kinds
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(k,)) for k in kinds]

    def _loop(self, kind: str) -> None:
        with requests.Session() as browser:
            while not self._stop.is_set():
                self.answers.append(call(self.served, browser, kind))
                time.sleep(0.03)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(DB_BOUND + 15)

    def wait_for_successes(self, count: int, within: float) -> None:
        """Wait until each kind has ``count`` successes (the load is warmed up)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            ok = [a.kind for a in list(self.answers) if judge(a, self.served) == "ok"]
            if all(ok.count(k) >= count for k in self.kinds):
                return
            time.sleep(0.05)
        raise AssertionError("no steady successes before the fault: " + self.summary())

    def verdicts(self) -> list[tuple[Answer, str]]:
        return [(a, judge(a, self.served)) for a in self.answers]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for answer, verdict in self.verdicts():
            key = f"{answer.kind} {verdict}"
            counts[key] = counts.get(key, 0) + 1
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


def assert_no_half_written_sign_ins(
    served: Served, smtp: FaultySmtp, answers: list[Answer]
) -> None:
    """An e-mail request that succeeded has its token row and its message (its link
    works); one that answered 503 left no row. (Its message may have gone out if the
    database failed only once the message was on its way; its link is then dead.)"""
    stored = {row.identifier for row in served.rows("SELECT identifier FROM verification_tokens")}
    delivered = set(smtp.recipients)
    wrong = []
    for answer in answers:
        if answer.address is None or answer.error:
            continue
        verdict = judge(answer, served)
        found = (answer.address in stored, answer.address in delivered)
        if verdict == "ok" and found != (True, True):
            wrong.append(f"succeeded, but (row, message) = {found}: {describe(answer)}")
        if verdict == "unavailable" and found[0]:
            wrong.append(f"503, but its token row stayed: {describe(answer)}")
    assert not wrong, "\n".join(wrong)


def booted_workers(served: Served) -> int:
    return served.server.error_log.read_text().count("Booting worker")


@pytest.mark.e2e
def test_postgres_restart_under_load_answers_503_then_recovers_in_the_same_process(
    pg_up: Served, smtp: FaultySmtp
) -> None:
    served = pg_up
    workers_before = booted_workers(served)
    with Load(served) as load:
        load.wait_for_successes(2, within=DB_BOUND + 10)
        served.cluster.restart()  # fast shutdown: every connection dies; returns once up
        back = time.monotonic()
        time.sleep(RECOVERY + 2)
    verdicts = load.verdicts()
    bad = [f"{v}: {describe(a)}" for a, v in verdicts if v not in ("ok", "unavailable")]
    assert not bad, "\n".join(bad)
    # The restart was felt (otherwise this test proved nothing)...
    assert any(v == "unavailable" for _, v in verdicts), load.summary()
    # ...and RECOVERY seconds after PostgreSQL is back, everything succeeds again.
    late = [(a, v) for a, v in verdicts if a.started >= back + RECOVERY]
    assert {a.kind for a, _ in late} == set(KINDS), load.summary()
    still = [describe(a) for a, v in late if v != "ok"]
    assert not still, "still failing after the restart:\n" + "\n".join(still)
    # The same worker process served throughout: none crashed or was replaced.
    assert booted_workers(served) == workers_before
    assert "WORKER TIMEOUT" not in served.server.error_log.read_text()
    assert_no_half_written_sign_ins(served, smtp, load.answers)


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["email", "email-json"])
def test_postgres_lost_while_the_mail_is_sent_is_a_503_or_a_success_never_a_500(
    pg_up: Served, smtp: FaultySmtp, kind: str
) -> None:
    """The database goes away while the SMTP server takes the message: after the request
    wrote its token row, before the end of the request. Whatever the app does then, the
    answer is a success whose row is stored, or a clear 503 whose row is not; never a
    500 (the outage in the middle of the load test hits this window at random)."""
    served = pg_up
    stopped: list[float] = []

    def stop_postgres() -> None:
        _, took = timed(served.cluster.stop)
        stopped.append(took)

    smtp.on_data = stop_postgres
    with requests.Session() as browser:
        answer = call(served, browser, kind)
    smtp.on_data = None
    assert stopped, "the message never reached the SMTP server"
    served.cluster.start()
    wait_until_serving(served, RECOVERY + DB_BOUND)
    # The SMTP server held its answer while PostgreSQL stopped: that time is not the app's.
    answer.elapsed -= stopped[0]
    verdict = judge(answer, served)
    assert verdict in ("ok", "unavailable"), f"{verdict}: {describe(answer)}"
    assert smtp.recipients == [answer.address]
    assert_no_half_written_sign_ins(served, smtp, [answer])


@pytest.mark.e2e
def test_postgres_stopped_for_good_answers_503_within_the_bound(
    pg_up: Served, smtp: FaultySmtp
) -> None:
    served = pg_up
    served.cluster.stop()
    try:
        with Load(served) as load:
            time.sleep(3)
    finally:
        served.cluster.start()
    verdicts = load.verdicts()
    assert {a.kind for a, _ in verdicts} == set(KINDS)
    bad = [f"{v}: {describe(a)}" for a, v in verdicts if v != "unavailable"]
    assert not bad, "\n".join(bad)
    # A database that is down from the start fails the request before any message goes.
    assert smtp.recipients == []
    wait_until_serving(served, RECOVERY + DB_BOUND)
    assert_no_half_written_sign_ins(served, smtp, load.answers)


# =========================================================================================
# 2. SMTP refusing, hanging up, stalling, absent (in process, SQLite and PostgreSQL)
# =========================================================================================


def request_link(app: Flask, address: str, *, json_mode: bool) -> tuple[Any, float, FlaskClient]:
    """POST an e-mail sign-in request from a new browser; return the answer, how long it
    took and the browser."""
    client = app.test_client()
    data = {"csrfToken": client.get("/auth/csrf").json["csrfToken"], "email": address}  # type: ignore[index]
    if json_mode:
        data["json"] = "true"
    response, took = timed(lambda: client.post("/auth/signin/email", data=data))
    return response, took, client


def destination(response: Any, *, json_mode: bool) -> str:
    """Where an auth answer sends the browser: the error code it names (on the error
    route, or the sign-in page where Auth.js sends scripts for sign-in codes), else the
    route's name (``verify-request``); an answer that sends nowhere is described."""
    if json_mode:
        if response.status_code != 200 or not isinstance(response.json, dict):
            return f"{response.status_code} {response.get_data(as_text=True)[:200]}"
        url = response.json.get("url", "")
    else:
        if response.status_code != 302:
            return f"{response.status_code} {response.get_data(as_text=True)[:200]}"
        url = response.headers["Location"]
    parts = urlsplit(url)
    error = parse_qs(parts.query).get("error")
    if error and parts.path in ("/auth/error", "/auth/signin"):
        return error[0]
    return parts.path.removeprefix("/auth/")


@dataclass
class MailAttempt:
    json_mode: bool
    address: str
    response: Any = None
    took: float = 0.0
    client: FlaskClient | None = None


#: The two ways of asking: a browser's form (redirect) and an Auth.js client (JSON).
BOTH_MODES = (False, True)


def request_links(
    app: Flask, modes: tuple[bool, ...] = BOTH_MODES, *, at_once: bool = False
) -> list[MailAttempt]:
    """An e-mail sign-in request per answer mode in ``modes``, each from a new browser:
    one after the other, or all at the same time."""
    attempts = [MailAttempt(mode, unique_address("fault")) for mode in modes]

    def run(attempt: MailAttempt) -> None:
        attempt.response, attempt.took, attempt.client = request_link(
            app, attempt.address, json_mode=attempt.json_mode
        )

    if not at_once:
        for attempt in attempts:
            run(attempt)
        return attempts
    with ThreadPoolExecutor(len(attempts)) as pool:
        list(pool.map(run, attempts))
    return attempts


def assert_email_signin_and_nothing_stored(
    app: Flask, attempts: list[MailAttempt], *, stall: bool
) -> None:
    for attempt in attempts:
        where = destination(attempt.response, json_mode=attempt.json_mode)
        mode = "JSON" if attempt.json_mode else "redirect"
        assert where == "EmailSignin", f"{mode}: {where}"
        assert attempt.took <= SMTP_BOUND, f"{mode}: {attempt.took:.2f}s"
        if stall:
            assert attempt.took >= EMAIL_TIMEOUT * STALL_FLOOR, f"{mode}: {attempt.took:.2f}s"
        # No code binding for a request that never happened.
        assert attempt.client is not None
        assert attempt.client.get_cookie("auth.email-browser", path="/auth") is None
    assert row_count(app, VerificationToken) == 0


def assert_a_healthy_server_delivers(app: Flask, smtp: FaultySmtp) -> None:
    address = unique_address("healthy")
    response, took, _ = request_link(app, address, json_mode=False)
    assert destination(response, json_mode=False) == "verify-request"
    assert took <= SLACK
    assert row_count(app, VerificationToken, identifier=address) == 1
    assert smtp.recipients == [address]


#: What the SMTP server does wrong, and the command it must have received (so the test
#: knows the fault was reached). Stalls last longer than EMAIL_TIMEOUT.
SMTP_FAULTS = {
    "rcpt-554": "RCPT",
    "data-554": "DATA",
    "rcpt-hangup": "RCPT",
    "data-hangup": "DATA",
    "ehlo-stall": "EHLO",
    "data-stall": "DATA",
}


@pytest.mark.parametrize("fault", SMTP_FAULTS)
def test_smtp_refusing_or_stalling_is_email_signin_in_time_and_stores_nothing(
    fault: str, make_app: Callable[..., Flask], smtp: FaultySmtp
) -> None:
    smtp.fault = fault
    app = make_app(EMAIL_SERVER=smtp.url(), EMAIL_TIMEOUT=str(EMAIL_TIMEOUT), **NO_EMAIL_LIMITS)
    attempts = request_links(app)
    assert_email_signin_and_nothing_stored(app, attempts, stall=fault.endswith("stall"))
    assert smtp.commands[SMTP_FAULTS[fault]] >= 2
    assert smtp.messages == []
    smtp.fault = None
    assert_a_healthy_server_delivers(app, smtp)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_requests_waiting_on_one_stalled_smtp_server_each_cost_one_timeout(
    make_app: Callable[..., Flask], smtp: FaultySmtp
) -> None:
    """CROWD e-mail requests at once to a mail server that never confirms their message:
    each costs one EMAIL_TIMEOUT, not one after the other (PostgreSQL: on SQLite the
    request's write lock, held while it sends, does serialise them)."""
    smtp.fault = "data-stall"
    app = make_app(EMAIL_SERVER=smtp.url(), EMAIL_TIMEOUT=str(EMAIL_TIMEOUT), **NO_EMAIL_LIMITS)
    attempts = request_links(app, BOTH_MODES * (CROWD // 2), at_once=True)
    assert smtp.commands["DATA"] == CROWD
    assert_email_signin_and_nothing_stored(app, attempts, stall=True)


@contextmanager
def silent_listener(port: int) -> Iterator[None]:
    """A server that takes connections (the kernel's backlog) and never says a word."""
    with closing(socket.socket()) as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen(16)
        yield


@pytest.mark.parametrize("fault", ["not-listening", "never-greets", "drops-connections"])
def test_smtp_unreachable_is_email_signin_in_time_then_a_server_there_works(
    fault: str, make_app: Callable[..., Flask]
) -> None:
    with ExitStack() as stack:
        if fault == "drops-connections":
            port = stack.enter_context(syn_dropping_port())
        else:
            port = free_port()
            if fault == "never-greets":
                stack.enter_context(silent_listener(port))
        app = make_app(
            EMAIL_SERVER=f"smtp://127.0.0.1:{port}",
            EMAIL_TIMEOUT=str(EMAIL_TIMEOUT),
            **NO_EMAIL_LIMITS,
        )
        attempts = request_links(app)
    assert_email_signin_and_nothing_stored(app, attempts, stall=fault != "not-listening")
    # A mail server now answers at that address: the same app delivers at once.
    healthy = FaultySmtp().start(port)
    try:
        assert_a_healthy_server_delivers(app, healthy)
    finally:
        healthy.stop()


# =========================================================================================
# 3. The identity provider down, stalling or answering garbage
# =========================================================================================

#: How an endpoint fails: nothing listens; connection attempts are dropped (connect
#: timeout); it takes the request and never answers (read timeout); 500; 200 with HTML;
#: bytes that are not HTTP.
PROVIDER_FAULTS = ("refused", "drops-connections", "stall", "http-500", "not-json", "not-http")
#: The timeout that ends each stall.
STALL_TIMEOUTS = {"drops-connections": HTTP_CONNECT_TIMEOUT, "stall": HTTP_READ_TIMEOUT}
DISCOVERY = "/.well-known/openid-configuration"


@pytest.fixture(scope="module")
def idp_server() -> Iterator[FakeIdP]:
    with fake_idp() as fake:
        yield fake


@pytest.fixture
def idp(idp_server: FakeIdP) -> Iterator[FakeIdP]:
    """The module's fake provider (tests/support/oauth.py), healthy at the start of each
    test: a test points some of its discovery document's endpoints at broken servers."""
    healthy = dict(idp_server.discovery)
    idp_server.hits.clear()
    yield idp_server
    idp_server.discovery = healthy


@contextmanager
def broken_origin(fault: str) -> Iterator[tuple[str, BrokenHTTP | None]]:
    """An origin (``http://127.0.0.1:<port>``) whose every endpoint fails as ``fault``
    says, and the server counting its requests (None where no request can arrive)."""
    if fault == "refused":
        yield f"http://127.0.0.1:{free_port()}", None
    elif fault == "drops-connections":
        with syn_dropping_port() as port:
            yield f"http://127.0.0.1:{port}", None
    else:
        with BrokenHTTP(fault) as server:
            yield server.origin, server


def start_sign_in(app: Flask, provider: str, *, json_mode: bool) -> tuple[Any, float]:
    """POST signin/<provider> from a new browser; return the answer and its time."""
    client = app.test_client()
    data = {"csrfToken": client.get("/auth/csrf").json["csrfToken"]}  # type: ignore[index]
    if json_mode:
        data["json"] = "true"
    return timed(lambda: client.post(f"/auth/signin/{provider}", data=data))


def sign_in_cookies(response: Any, provider: str) -> list[str]:
    """The sign-in state cookies (state, PKCE, nonce) an answer sets for ``provider``."""
    return [c for c in response.headers.getlist("Set-Cookie") if f".{provider}." in c]


def assert_no_sign_in_stored(app: Flask) -> None:
    assert (row_count(app, User), row_count(app, Account), row_count(app, Session)) == (0, 0, 0)


def assert_within_provider_bound(took: float, fault: str, what: str) -> None:
    assert took <= PROVIDER_BOUND, f"{what}: {took:.2f}s"
    if fault in STALL_TIMEOUTS:
        assert took >= STALL_TIMEOUTS[fault] * STALL_FLOOR, f"{what}: {took:.2f}s"


# One database: these faults happen before anything is written, so a second database
# would only double the stalls' time (and PostgreSQL's emptying of its tables after each).
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@sqlite_only
@pytest.mark.parametrize("fault", PROVIDER_FAULTS)
def test_discovery_down_is_oauth_signin_in_time(
    fault: str, idp: FakeIdP, make_oauth_app: Callable[..., Flask]
) -> None:
    with broken_origin(fault) as (origin, server):
        app = make_oauth_app([idp.provider_config(issuer=origin)], **HTTP_TIMEOUTS)
        for json_mode in (False, True):
            mode = "JSON" if json_mode else "redirect"
            response, took = start_sign_in(app, "fake", json_mode=json_mode)
            assert destination(response, json_mode=json_mode) == "OAuthSignin", mode
            assert_within_provider_bound(took, fault, mode)
            # The browser is sent nowhere else and keeps no sign-in state.
            assert sign_in_cookies(response, "fake") == [], mode
        if server is not None:
            assert server.hits[DISCOVERY] == 2
    assert_no_sign_in_stored(app)


@sqlite_only
@pytest.mark.parametrize("fault", PROVIDER_FAULTS)
@pytest.mark.parametrize("endpoint", ["jwks_uri", "token_endpoint", "userinfo_endpoint"])
def test_callback_endpoint_down_is_oauth_callback_in_time(
    endpoint: str, fault: str, idp: FakeIdP, make_oauth_app: Callable[..., Flask]
) -> None:
    with broken_origin(fault) as (origin, server):
        path = "/" + endpoint.split("_")[0]
        idp.discovery[endpoint] = origin + path
        app = make_oauth_app([idp.provider_config()], **HTTP_TIMEOUTS)
        browser = Browser(app.test_client())
        start = browser.start("fake")
        assert start.status_code == 302, start.headers.get("Location")
        callback = browser.authorize(start.headers["Location"])
        response, took = timed(lambda: browser.client.get(callback))
        if server is not None:
            assert server.hits[path] == 1
    assert destination(response, json_mode=False) == "OAuthCallback"
    assert_within_provider_bound(took, fault, endpoint)
    assert browser.client.get_cookie("auth.session-token") is None
    assert_no_sign_in_stored(app)
    # The steps before the broken one were taken: the fault is what stopped the sign-in.
    if endpoint != "token_endpoint":
        assert idp.hits["/token"] == 1


@sqlite_only
@pytest.mark.parametrize("endpoint", ["discovery", "jwks_uri"])
def test_sign_ins_waiting_on_one_stalled_provider_each_cost_one_timeout(
    endpoint: str, idp: FakeIdP, make_oauth_app: Callable[..., Flask]
) -> None:
    """docs/oauth.md: "A provider that stalls costs one request its timeout", however
    many requests wait on it at once: CROWD sign-ins stuck at the same stalled discovery
    (or JWKS) all answer within the bound of one call, not one after the other."""
    read_timeout = 2.0  # CROWD of them in a row would take far beyond the bound
    settings = {
        "AUTH_HTTP_CONNECT_TIMEOUT": str(HTTP_CONNECT_TIMEOUT),
        "AUTH_HTTP_READ_TIMEOUT": str(read_timeout),
    }
    bound = HTTP_CONNECT_TIMEOUT + read_timeout + SLACK
    with BrokenHTTP("stall") as stall:
        attempts: list[Callable[[], tuple[Any, float]]]
        if endpoint == "discovery":
            app = make_oauth_app([idp.provider_config(issuer=stall.origin)], **settings)
            attempts = [lambda: start_sign_in(app, "fake", json_mode=False)] * CROWD
            expected = "OAuthSignin"
        else:
            idp.discovery[endpoint] = stall.origin + "/jwks"
            app = make_oauth_app([idp.provider_config()], **settings)
            attempts = [callback_attempt(Browser(app.test_client())) for _ in range(CROWD)]
            expected = "OAuthCallback"
        with ThreadPoolExecutor(CROWD) as pool:
            results = list(pool.map(lambda attempt: attempt(), attempts))
    assert [destination(r, json_mode=False) for r, _ in results] == [expected] * CROWD
    times = sorted(round(took, 2) for _, took in results)
    assert times[-1] <= bound, f"{times}: beyond {bound}s"
    assert_no_sign_in_stored(app)


def callback_attempt(browser: Browser) -> Callable[[], tuple[Any, float]]:
    """Take ``browser`` through the provider; return the callback, timed, to make later."""
    url = browser.authorize(browser.start("fake").headers["Location"])
    return lambda: timed(lambda: browser.client.get(url))


@pytest.mark.e2e
def test_a_request_stuck_on_a_provider_does_not_hold_up_other_sessions(
    tmp_path: Path, idp: FakeIdP
) -> None:
    """Under the production server (one worker of four threads), two sign-ins wait on a
    stalled provider (the discovery of one, the token endpoint of another) while someone
    else reads their session again and again: each read is answered at once, and both
    sign-ins fail in time with nothing stored."""
    read_timeout = 4.0  # long enough for the reads to happen well inside the stall
    database = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    migrate_database(database)
    email, token = "sam@example.com", new_token()
    app = create_app(base_config(database), environ={})
    add_signed_in_user(app, email, token)
    with BrokenHTTP("stall") as stall:
        idp.discovery["token_endpoint"] = stall.origin + "/token"
        config = write_providers_toml(
            tmp_path / "auth.toml",
            [idp.provider_config("fake"), idp.provider_config("stuck", issuer=stall.origin)],
        )
        with run_server(
            tmp_path,
            database=database,
            AUTH_CONFIG=str(config),
            AUTH_HTTP_CONNECT_TIMEOUT=str(HTTP_CONNECT_TIMEOUT),
            AUTH_HTTP_READ_TIMEOUT=str(read_timeout),
        ) as server:
            stuck = stuck_sign_ins(server)
            with ThreadPoolExecutor(2) as pool:
                pending = {name: pool.submit(run) for name, run in stuck.items()}
                wait_for(lambda: stall.hits["/token"] + stall.hits[DISCOVERY] == 2, 10)
                reads = []
                with requests.Session() as other:
                    for _ in range(10):
                        r, took = timed(
                            lambda: other.get(
                                f"{server.url}/auth/session",
                                headers={"Cookie": f"auth.session-token={token}"},
                                timeout=10,
                            )
                        )
                        user = (r.json() or {}).get("user") or {}
                        reads.append((r.status_code, user.get("email"), took))
                still_waiting = sorted(name for name, f in pending.items() if not f.done())
                answers = {name: f.result() for name, f in pending.items()}
    assert [(s, e) for s, e, _ in reads] == [(200, email)] * 10
    times = [round(took, 2) for _, _, took in reads]
    assert max(times) <= SLACK, f"session reads took {times}s while the sign-ins waited"
    assert still_waiting == ["discovery", "token"], "the reads were not made during the stall"
    bound = HTTP_CONNECT_TIMEOUT + read_timeout + SLACK
    for name, code in (("discovery", "OAuthSignin"), ("token", "OAuthCallback")):
        response, took = answers[name]
        assert response.status_code == 302, (name, response.status_code)
        assert f"error={code}" in response.headers["Location"], name
        assert read_timeout * STALL_FLOOR <= took <= bound, (name, took)
    assert (row_count(app, User), row_count(app, Account), row_count(app, Session)) == (1, 0, 1)
    with app.app_context():
        db.engine.dispose()


def add_signed_in_user(app: Flask, email: str, token: str) -> None:
    """Add a verified user with a live session whose cookie value is ``token``."""
    with app.app_context():
        user = User(email=email, email_verified=datetime.now(UTC), name=email.split("@")[0])
        db.session.add(user)
        db.session.flush()
        now = datetime.now(UTC)
        db.session.add(
            Session(
                user_id=user.id,
                token_hash=hash_token(token),
                expires=now + timedelta(days=30),
                created_at=now,
                last_active_at=now,
            )
        )
        db.session.commit()


def stuck_sign_ins(server: Server) -> dict[str, Callable[[], tuple[Any, float]]]:
    """Two sign-ins that will wait on the stalled provider, as callables returning the
    app's answer and how long it took: ``discovery`` starts one at the provider whose
    discovery stalls; ``token`` comes back from the fake provider to a callback whose
    token endpoint stalls (its start is made here, before)."""
    first, second = requests.Session(), requests.Session()

    def csrf(browser: requests.Session) -> str:
        return str(browser.get(f"{server.url}/auth/csrf", timeout=10).json()["csrfToken"])

    try:
        first_csrf = csrf(first)
        start = second.post(
            f"{server.url}/auth/signin/fake",
            data={"csrfToken": csrf(second)},
            allow_redirects=False,
            timeout=10,
        )
        assert start.status_code == 302, start.text
        with requests.Session() as at_provider:
            callback = follow_to_app(at_provider, start.headers["Location"], origin=server.url)
    except BaseException:
        first.close()
        second.close()
        raise

    def discovery() -> tuple[Any, float]:
        with first:
            return timed(
                lambda: first.post(
                    f"{server.url}/auth/signin/stuck",
                    data={"csrfToken": first_csrf},
                    allow_redirects=False,
                    timeout=30,
                )
            )

    def token() -> tuple[Any, float]:
        with second:
            return timed(lambda: second.get(callback, allow_redirects=False, timeout=30))

    return {"discovery": discovery, "token": token}


def wait_for(condition: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)
