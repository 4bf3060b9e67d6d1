"""Several instances on one database, through PgBouncer, behind HAProxy (issue 15): the real
parts on loopback, started once by ``scripts/cluster up`` (tests/support/cluster.py).

Everything the instances share lives in the database, so an instance never trusts what
another one saw: a session made through one is read by the other, a sign-out on one is
refused by the other at once, throttles count once across both, a link is spent once
however the balancer spreads its confirmations. The pieces fail and are replaced without
a failed request: PgBouncer killed gives clear 503s and service comes back by itself, an
instance killed is routed around, a rolling restart under load loses nothing.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from flask import Flask

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.db import db
from webapp.web.error_answers import RETRY_AFTER

from .support.cluster import INSTANCES, MISSING_PACKAGES, PASSWORD, Browser, Cluster, Load, wait_for
from .support.config import IN_CI, TEST_SECRET, base_config
from .support.databases import PG_ADMIN_URL, drop_pg_database, require_postgres
from .support.mail import Mailbox, link_of
from .support.servers import free_port

pytestmark = pytest.mark.cluster

#: Within this long of PgBouncer being back, session reads succeed again: the answers'
#: Retry-After, plus HAProxy's two checks a second apart.
RECOVERY = RETRY_AFTER + 2.0


def _ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, _smtp_server: Mailbox) -> Iterator[Cluster]:
    """The cluster, on a new database of the shared PostgreSQL, for the whole session."""
    require_postgres()
    folder = tmp_path_factory.mktemp("cluster")
    balancer, app1, app2, pgbouncer = _ports(4)
    name = f"webapp_cluster_{uuid.uuid4().hex[:10]}"
    pg = sa.engine.make_url(PG_ADMIN_URL)
    providers = folder / "auth.toml"
    providers.write_text('[[providers]]\nid = "password"\ntype = "credentials"\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AUTH_", "EMAIL_", "DB_", "CLUSTER_", "DATABASE_"))
    }
    env.update(
        CLUSTER_DIR=str(folder),
        CLUSTER_PORT=str(balancer),
        CLUSTER_APP_PORTS=f"{app1} {app2}",
        CLUSTER_PGBOUNCER_PORT=str(pgbouncer),
        CLUSTER_PG_HOST=pg.host or "127.0.0.1",
        CLUSTER_PG_PORT=str(pg.port or 5432),
        CLUSTER_PG_USER=pg.username or "postgres",
        CLUSTER_DB=name,
        AUTH_SECRET=TEST_SECRET,
        AUTH_CONFIG=str(providers),
        AUTH_TEST_PASSWORD=PASSWORD,
        WSGI_APP="tests.support.cluster_app:app",
        EMAIL_SERVER=_smtp_server.url(),
        EMAIL_TIMEOUT="5",
    )
    made = Cluster(
        folder,
        env,
        url=f"http://127.0.0.1:{balancer}",
        instances={"app1": f"http://127.0.0.1:{app1}", "app2": f"http://127.0.0.1:{app2}"},
        database=str(pg.set(database=name)),
        pooled=str(pg.set(host="127.0.0.1", port=pgbouncer, database=name)),
    )
    try:
        started = made.command("up")
    except AssertionError as exc:
        if f"exited with {MISSING_PACKAGES}" in str(exc):
            if IN_CI:
                pytest.fail(f"{exc} (CI=true: a missing package is a failure)", pytrace=False)
            pytest.skip("pgbouncer or haproxy is missing and cannot be installed here")
        made.command("down")
        drop_pg_database(made.database)
        raise
    assert started.stdout.strip() == made.url
    try:
        yield made
    finally:
        made.command("down")
        drop_pg_database(made.database)


@pytest.fixture
def person(cluster: Cluster, mailbox: Mailbox) -> tuple[Browser, str, str]:
    """A browser signed in by e-mail through the balancer: it, its address and cookie."""
    browser = Browser()
    address = f"pat-{uuid.uuid4().hex[:8]}@example.com"
    return browser, address, browser.sign_in(cluster, mailbox, address)


def test_instances_started_together_migrated_the_schema_once(cluster: Cluster) -> None:
    logs = {name: cluster.log(name) for name in INSTANCES}
    migrated = [name for name, text in logs.items() if "migrated the schema from empty" in text]
    assert len(migrated) == 1, logs
    [other] = set(INSTANCES) - set(migrated)
    assert "Running upgrade" not in logs[other]
    assert "the schema is up to date" in logs[other]
    steps = len(list(ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()))
    assert logs[migrated[0]].count("Running upgrade") == steps
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert cluster.rows("SELECT version_num FROM auth_alembic_version")[0][0] == head
    for url in cluster.instances.values():
        assert requests.get(f"{url}/readyz", timeout=5).status_code == 200


def test_a_session_made_through_the_balancer_is_read_by_each_instance(
    cluster: Cluster, person: tuple[Browser, str, str]
) -> None:
    browser, address, cookie = person
    for url in cluster.instances.values():
        assert browser.session_email(url, cookie) == address
    # The balancer spreads requests over both (its log names the instance of each).
    for _ in range(4):
        assert browser.session_email(cluster.url) == address
    wait_for(
        lambda: all(f"webapp/{name}" in cluster.log("haproxy") for name in INSTANCES),
        within=5,
        what="both instances in HAProxy's log",
    )


def test_a_sign_out_on_one_instance_is_refused_by_the_other_at_once(
    cluster: Cluster, mailbox: Mailbox, person: tuple[Browser, str, str]
) -> None:
    first, address, first_cookie = person
    second = Browser()
    second_cookie = second.sign_in(cluster, mailbox, address)
    app1, app2 = cluster.instances["app1"], cluster.instances["app2"]
    assert second.session_email(app2, second_cookie) == address

    ended = first.post(app1, "/account/sessions/end-others", {})
    assert ended.status_code == 303
    assert second.session_email(app2, second_cookie) is None

    assert first.session_email(app1, first_cookie) == address
    assert first.post(app2, "/auth/signout", {}).status_code == 302
    assert first.session_email(app1, first_cookie) is None


def test_email_throttles_count_once_across_the_instances(
    cluster: Cluster, mailbox: Mailbox
) -> None:
    """Requests go to each instance in turn, each from the client address the balancer
    would forward (the instances believe one hop): with counters per instance twice as
    many messages would go out."""
    origins = list(cluster.instances.values())
    browser = Browser()
    # Per client address: 20 requests in 10 minutes (EMAIL_IP_LIMIT), whatever the address.
    for n in range(24):
        forwarded = {"X-Forwarded-For": "198.51.100.20"}
        browser.request_link(origins[n % 2], f"ip-{n}@example.com", headers=forwarded)
    assert len(mailbox.messages) == 20
    mailbox.reset()
    # Per address from one client address: 3 in 10 minutes (EMAIL_ADDRESS_IP_LIMIT).
    for n in range(6):
        forwarded = {"X-Forwarded-For": "198.51.100.21"}
        browser.request_link(origins[n % 2], "one@example.com", headers=forwarded)
    assert len(mailbox.messages) == 3


def test_a_link_confirmed_20_times_at_once_over_both_instances_signs_in_once(
    cluster: Cluster, mailbox: Mailbox
) -> None:
    racers = 20
    address = f"race-{uuid.uuid4().hex[:8]}@example.com"
    Browser().request_link(cluster.url, address)
    link = link_of(mailbox.last())
    origins = list(cluster.instances.values())
    browsers = [Browser() for _ in range(racers)]
    # Each opens the link on one instance and confirms it on the other.
    forms = [b.open_link(origins[n % 2], link) for n, b in enumerate(browsers)]
    start = threading.Barrier(racers)

    def press(n: int) -> str:
        start.wait()
        answer = browsers[n].confirm(origins[(n + 1) % 2], link, forms[n])
        return str(answer.headers.get("Location"))

    with ThreadPoolExecutor(racers) as pool:
        places = list(pool.map(press, range(racers)))
    assert places.count(f"{cluster.url}/") == 1, places
    assert sum("error=Verification" in p for p in places) == racers - 1, places
    sessions = cluster.rows(
        "SELECT count(*) FROM sessions JOIN users ON users.id = sessions.user_id "
        "WHERE users.email = :address",
        address=address,
    )
    assert sessions[0][0] == 1


def test_credentials_lockout_is_shared_by_the_instances(cluster: Cluster) -> None:
    """Five wrong passwords for one identifier from one client address, spread over both
    instances, lock it there (AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT, 5 in 15 minutes)."""
    address = f"lock-{uuid.uuid4().hex[:8]}@example.com"
    origins = list(cluster.instances.values())
    browser = Browser()

    def attempt(origin: str, password: str, client: str) -> str:
        form = {"email": address, "password": password}
        answer = browser.post(
            origin, "/auth/callback/password", form, headers={"X-Forwarded-For": client}
        )
        assert answer.status_code == 302
        return str(answer.headers["Location"])

    for n in range(5):
        assert "error=CredentialsSignin" in attempt(origins[n % 2], "wrong", "192.0.2.7")
    # The right password now fails from that address on either instance…
    for origin in origins:
        assert "error=CredentialsSignin" in attempt(origin, PASSWORD, "192.0.2.7")
    # …and works from another one: the lock is the shared count, not the password.
    assert attempt(origins[0], PASSWORD, "192.0.2.8") == f"{cluster.url}/"
    assert browser.session_email(origins[1]) == address


def _session_reads(app: Flask, cookie: str, *, threads: int, each: int) -> list[tuple[int, str]]:
    """``GET session`` from many threads at once: each answer's status and SQL count."""

    def reads(_: int) -> list[tuple[int, str]]:
        client = app.test_client()
        client.set_cookie("auth.session-token", cookie)
        answers = [client.get("/auth/session") for _ in range(each)]
        return [(r.status_code, r.headers.get("X-SQL-Statements", "")) for r in answers]

    with ThreadPoolExecutor(threads) as pool:
        return [answer for batch in pool.map(reads, range(threads)) for answer in batch]


@pytest.mark.parametrize("pooler", ["transaction", "none"])
def test_the_session_read_through_pgbouncer_is_one_statement_never_prepared(
    cluster: Cluster,
    person: tuple[Browser, str, str],
    pooler: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With DATABASE_POOLER=transaction every read is one statement and none fails. Without
    it, psycopg prepares the read on a connection after five runs, and PgBouncer runs a
    later transaction of that connection on a server connection where the statement is
    missing (or already exists): reads fail. More client connections than PgBouncer has
    server connections (deploy/pgbouncer.ini: 10) make that happen at once."""
    _, _, cookie = person
    settings = {"DATABASE_POOLER": pooler, "SQL_COUNT_HEADERS": "true", "DB_POOL_SIZE": "16"}
    app = create_app(base_config(cluster.pooled, **settings), environ={})
    try:
        answers = _session_reads(app, cookie, threads=16, each=20)
    finally:
        with app.app_context():
            db.engine.dispose()
    if pooler == "transaction":
        assert set(answers) == {(200, "1")}
        return
    assert any(status != 200 for status, _ in answers)
    errors = {str(rec.exc_info[1]) for rec in caplog.records if rec.exc_info}
    missing = re.compile(r'prepared statement "_pg3_\d+" (does not|already) exist')
    assert errors and all(missing.search(error) for error in errors), errors


def test_the_account_page_s_reads_together_go_through_pgbouncer(
    cluster: Cluster, person: tuple[Browser, str, str]
) -> None:
    """The account page sends five reads in one pipeline (``database.read_together``): in
    transaction mode PgBouncer holds a server connection from the first to the Sync, and
    many threads at once, over its 10 server connections, each get their own answers."""
    _, address, cookie = person
    settings = {"DATABASE_POOLER": "transaction", "DB_POOL_SIZE": "16"}
    app = create_app(base_config(cluster.pooled, **settings), environ={})

    def pages(_: int) -> list[tuple[int, bool]]:
        client = app.test_client()
        client.set_cookie("auth.session-token", cookie)
        answers = [client.get("/account") for _ in range(10)]
        return [(r.status_code, address in r.get_data(as_text=True)) for r in answers]

    try:
        with ThreadPoolExecutor(16) as pool:
            answers = [a for batch in pool.map(pages, range(16)) for a in batch]
    finally:
        with app.app_context():
            db.engine.dispose()
    assert set(answers) == {(200, True)}


def test_pgbouncer_killed_gives_clear_503s_then_service_comes_back_by_itself(
    cluster: Cluster, person: tuple[Browser, str, str]
) -> None:
    browser, address, cookie = person
    instances_before = {name: cluster.pid(name) for name in INSTANCES}
    with Load(cluster.url, cookie, address, ("session", "csrf")) as load:
        wait_for(lambda: load.successes() > 10, within=30, what="steady successes")
        cluster.kill("pgbouncer")
        wait_for(
            lambda: all(cluster.status(name) == "DOWN" for name in INSTANCES),
            within=10,
            what="HAProxy to see no instance ready",
        )
        for url in cluster.instances.values():
            ready = requests.get(f"{url}/readyz", timeout=5)
            assert (ready.status_code, ready.headers["Retry-After"]) == (503, str(RETRY_AFTER))
        down = len(load.answers)
        wait_for(lambda: len(load.answers) > down + 10, within=30, what="answers while down")
        cluster.command("up")
        back = time.monotonic()
        restored = len(load.answers)
        wait_for(
            lambda: any(load.ok(a) for a in load.answers[restored:] if a.kind == "session"),
            within=RECOVERY,
            what="a session read after PgBouncer is back",
        )
        assert time.monotonic() - back <= RECOVERY
        wait_for(
            lambda: all(cluster.status(name) == "UP" for name in INSTANCES),
            within=10,
            what="both instances ready again",
        )
    answers = list(load.answers)
    failures = load.failures()
    assert failures, "PgBouncer's death went unnoticed: " + load.summary()
    unclear = [a.describe() for a in failures if a.kind != "session" or not a.is_clear_503()]
    assert not unclear, unclear
    # While no instance was ready, the balancer still sent requests to them: the CSRF route
    # needs no database and kept working.
    assert all(load.ok(a) for a in answers if a.kind == "csrf"), load.summary()
    assert {name: cluster.pid(name) for name in INSTANCES} == instances_before
    assert browser.session_email(cluster.url) == address


def test_an_instance_killed_under_load_is_routed_around(
    cluster: Cluster, person: tuple[Browser, str, str]
) -> None:
    """Reads in flight on the killed instance and new connections to it are sent to the
    other one (deploy/haproxy.cfg: retry-on, redispatch): no read fails."""
    browser, address, cookie = person
    with Load(cluster.url, cookie, address, ("session", "csrf")) as load:
        wait_for(lambda: load.successes() > 10, within=30, what="steady successes")
        cluster.kill("app1")
        wait_for(lambda: cluster.status("app1") == "DOWN", within=10, what="app1 DOWN")
        after = load.successes()
        wait_for(lambda: load.successes() > after + 20, within=30, what="reads after")
    assert not load.failures(), load.summary()
    # A form post goes to the instance left.
    assert Browser().post(cluster.url, "/auth/signout", {}).status_code == 302
    cluster.command("up")
    assert cluster.status("app1") == "UP"
    assert browser.session_email(cluster.instances["app1"], cookie) == address


def test_a_rolling_restart_under_load_fails_no_request(
    cluster: Cluster, person: tuple[Browser, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address, cookie = person
    before = {name: cluster.pid(name) for name in INSTANCES}
    started = time.monotonic()
    with Load(cluster.url, cookie, address, ("session", "csrf", "signout")) as load:
        wait_for(lambda: load.successes() > 10, within=30, what="steady successes")
        cluster.command("restart")
        after = load.successes()
        wait_for(lambda: load.successes() > after + 10, within=30, what="answers after")
    took = time.monotonic() - started
    assert not load.failures(), load.summary()
    after_pids = {name: cluster.pid(name) for name in INSTANCES}
    assert all(after_pids[name] != before[name] for name in INSTANCES), (before, after_pids)
    assert all(cluster.status(name) == "UP" for name in INSTANCES)
    with capsys.disabled():
        print(f"\nrolling restart: {len(load.answers)} requests in {took:.0f} s, 0 failed")


def test_the_run_directory_keeps_the_secret_and_the_settings_private(cluster: Cluster) -> None:
    for name in ("secret", "app.env", "haproxy.sock"):
        assert (cluster.folder / name).stat().st_mode & 0o077 == 0, name
