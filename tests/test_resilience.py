"""Outages: an unreachable database gives 503 with Retry-After, never a hang or a trace."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from webapp import create_app
from webapp.storage.db import db

from .support.config import TEST_SECRET, base_config
from .support.databases import pg_admin_engine
from .support.signin import demo_sign_in

# Port 1 on loopback: nothing listens, so connections are refused at once.
DOWN = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"


@pytest.fixture
def down_client():
    app = create_app(
        {
            "APP_ENV": "development",
            "AUTH_SECRET": TEST_SECRET,
            "AUTH_URL": "http://localhost/auth",
            "DATABASE_URL": DOWN,
            "TESTING": True,
        },
        environ={},
    )
    return app.test_client()


def test_session_read_with_the_database_down_is_503_json(down_client):
    down_client.set_cookie("auth.session-token", "a" * 43)
    r = down_client.get("/auth/session")
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "5"
    assert r.json == {"error": "ServiceUnavailable", "requestId": r.headers["X-Request-ID"]}


def test_pages_with_the_database_down_are_readable_503s(down_client):
    down_client.set_cookie("auth.session-token", "a" * 43)
    r = down_client.get("/", headers={"Accept": "text/html"})
    assert r.status_code == 503
    body = r.get_data(as_text=True)
    assert r.headers["X-Request-ID"] in body
    assert "psycopg" not in body and "127.0.0.1:1" not in body


def test_what_needs_no_database_still_works(down_client):
    assert down_client.get("/auth/session").json is None
    assert down_client.get("/auth/providers").status_code == 200
    assert down_client.get("/auth/csrf").status_code == 200
    assert down_client.get("/auth/signin").status_code == 200


def test_signin_with_the_database_down_changes_nothing_and_says_so(down_client):
    r = demo_sign_in(down_client)
    assert r.status_code == 503
    assert "session-token" not in r.headers.get("Set-Cookie", "")


def test_a_dropped_connection_costs_one_503_and_leaves_the_pool(postgres_url):
    # A restart or failover of PostgreSQL kills pooled connections under a running app.
    # The session read (on the driver directly, database.HotSelect) must answer 503 like
    # any database outage, once: the pool's other connections are as dead, and the next
    # request must get a fresh one, as SQLAlchemy's own pool invalidation would give.
    app = create_app(base_config(postgres_url), environ={})
    client = app.test_client()
    demo_sign_in(client)
    with app.app_context():
        db.engine.dispose()
        held = [db.engine.raw_connection() for _ in range(3)]
        for connection in held:
            connection.close()  # back to the pool: it now holds three
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"
    name = postgres_url.rsplit("/", 1)[1]
    with pg_admin_engine().connect() as conn:
        killed = conn.execute(
            sa.text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :n"
            ),
            {"n": name},
        ).scalar_one()
    assert killed == 3
    r = client.get("/auth/session")
    assert r.status_code == 503 and r.json["error"] == "ServiceUnavailable"
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"
    with app.app_context():
        db.engine.dispose()
