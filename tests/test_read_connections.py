"""The hot reads' own connections (database.ReadConnections), on PostgreSQL: reused, no
more than the threads reading at once, renewed and pinged as the pool renews and pings
its own, closed with the engine."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from webapp import create_app
from webapp.flows.account import account_page
from webapp.storage import database
from webapp.storage.db import db

from .support.config import base_config
from .support.databases import pg_admin_engine
from .support.signin import demo_sign_in


def backends(url: str) -> set[int]:
    """The server processes of the connections to ``url``'s database, as a DBA sees them."""
    with pg_admin_engine().connect() as conn:
        rows = conn.execute(
            sa.text("SELECT pid FROM pg_stat_activity WHERE datname = :n"),
            {"n": url.rsplit("/", 1)[1]},
        )
        return {pid for (pid,) in rows}


def settled_backends(url: str, expected: int) -> set[int]:
    """``backends(url)`` once it counts ``expected`` (a closed connection's server process
    leaves pg_stat_activity a moment after the client hangs up), or as it is after 5 s."""
    deadline = time.monotonic() + 5
    found = backends(url)
    while len(found) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        found = backends(url)
    return found


def terminate(pids: set[int]) -> None:
    with pg_admin_engine().connect() as conn:
        for pid in pids:
            conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})


@pytest.fixture
def signed_in(postgres_url):
    """A signed-in client of an app whose engine has no connection open yet."""
    apps = []

    def make(**settings):
        app = create_app(base_config(postgres_url, **settings), environ={})
        apps.append(app)
        client = app.test_client()
        demo_sign_in(client)
        with app.app_context():
            db.engine.dispose()
        assert settled_backends(postgres_url, 0) == set()
        return app, client

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


def read(client) -> None:
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"


def test_session_reads_share_one_connection(signed_in, postgres_url):
    _, client = signed_in()
    for _ in range(20):
        read(client)
    # A session read inside the update age is its one SELECT: nothing took a pooled
    # connection besides the read connection.
    assert len(backends(postgres_url)) == 1


def test_threads_reading_at_once_open_at_most_one_connection_each(signed_in, postgres_url):
    app, first = signed_in()
    token = first.get_cookie("auth.session-token").value
    clients = [app.test_client() for _ in range(4)]
    for client in clients:
        client.set_cookie("auth.session-token", token)
    failures: list[BaseException] = []

    def reads(client) -> None:
        try:
            for _ in range(25):
                read(client)
        except BaseException as exc:  # reported below, in the test's own thread
            failures.append(exc)

    threads = [threading.Thread(target=reads, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert 1 <= len(backends(postgres_url)) <= 4


def test_a_read_connection_is_renewed_after_the_pools_recycle_time(signed_in, postgres_url):
    _, client = signed_in()
    with freeze_time() as frozen:
        read(client)
        (first,) = backends(postgres_url)
        frozen.tick(1799)
        read(client)
        assert backends(postgres_url) == {first}
        frozen.tick(2)  # past the pool's 30 minutes (database.engine_options)
        read(client)
    (renewed,) = settled_backends(postgres_url, 1)
    assert renewed != first


def test_with_pre_ping_a_dropped_read_connection_is_replaced_unseen(signed_in, postgres_url):
    _, client = signed_in(DB_POOL_PRE_PING="true")
    read(client)
    terminate(backends(postgres_url))
    read(client)  # the ping found it gone: a new connection, and no 503


def test_without_pre_ping_a_dropped_read_connection_costs_one_503(signed_in, postgres_url):
    _, client = signed_in()
    read(client)
    terminate(backends(postgres_url))
    r = client.get("/auth/session")
    assert r.status_code == 503 and r.json["error"] == "ServiceUnavailable"
    read(client)


def test_disposing_the_engine_closes_the_read_connections(signed_in, postgres_url):
    app, client = signed_in()
    read(client)
    assert len(backends(postgres_url)) == 1
    with app.app_context():
        db.engine.dispose()
    assert settled_backends(postgres_url, 0) == set()
    read(client)  # and the next read opens one again
    assert len(backends(postgres_url)) == 1


def test_the_account_page_sends_its_five_reads_in_one_round_trip(signed_in, tmp_path):
    """``database.read_together``: the user, sign-in methods, passkeys, sessions and recent
    activity go in one pipeline, ended by one Sync, on the read connection the session read
    used (libpq's own trace of what the client sent)."""
    app, client = signed_in()
    read(client)
    with app.app_context():
        [connection] = database._read_connections(db.engine)._idle
    trace = tmp_path / "libpq.trace"
    with trace.open("w") as sink:
        connection.driver.pgconn.trace(sink.fileno())
        page = client.get("/account")
        connection.driver.pgconn.untrace()
    assert page.status_code == 200 and "ann@example.com" in page.get_data(as_text=True)
    # Lines of "<time> F|B <length> <message> <fields>": what the client sent, as names.
    sent = [
        f[3]
        for f in (line.split("\t") for line in trace.read_text().splitlines())
        if len(f) > 3 and f[1] == "F"
    ]
    syncs, statements = sent.count("Sync"), sent.count("Bind")
    # The session read, then the page's five reads: six statements, two round trips (one
    # after another, each would be its own).
    assert (statements, syncs) == (6, 2), sent


def test_a_failed_statement_fails_the_batch_and_its_connection_goes(signed_in, postgres_url):
    app, client = signed_in()
    read(client)
    before = backends(postgres_url)
    with app.test_request_context():
        with pytest.raises(sa.exc.DataError):
            database.read_together(
                (account_page._PAGE_ACCOUNTS, {"user_id": 1}),
                (account_page._PAGE_PASSKEYS, {"user_id": "not a number"}),
            )
        # The connection that failed was closed, not given back; the next batch opens one.
        assert database._read_connections(db.engine)._idle == []
        accounts, passkeys = database.read_together(
            (account_page._PAGE_ACCOUNTS, {"user_id": 1}),
            (account_page._PAGE_PASSKEYS, {"user_id": 1}),
        )
        assert (accounts, passkeys) == (
            account_page._PAGE_ACCOUNTS.all({"user_id": 1}),
            account_page._PAGE_PASSKEYS.all({"user_id": 1}),
        )
    assert settled_backends(postgres_url, 1) != before
