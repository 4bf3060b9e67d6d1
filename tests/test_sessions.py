"""Database sessions (docs/sessions-and-cookies.md): cookies, lifetime, update age, expiry,
hashing at rest."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from freezegun import freeze_time

from webapp.sessions.store import _READ
from webapp.storage.db import db
from webapp.storage.models import Session

from .support.signin import demo_sign_in

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def session_rows(app):
    with app.app_context():
        return db.session.scalars(sa.select(Session).order_by(Session.id)).all()


def set_cookies(response):
    return [h for h in response.headers.getlist("Set-Cookie") if "session-token" in h]


def test_cookie_attributes_on_http(client, auth):
    r = auth.signin()
    [cookie] = set_cookies(r)
    assert cookie.startswith("auth.session-token=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie
    assert "Expires=" in cookie


def test_cookie_attributes_on_https(make_app):
    app = make_app(AUTH_URL="https://localhost/auth")
    client = app.test_client()
    csrf_response = client.get("/auth/csrf", base_url="https://localhost")
    assert "__Host-auth.csrf-token=" in csrf_response.headers["Set-Cookie"]
    assert "Secure" in csrf_response.headers["Set-Cookie"]
    r = demo_sign_in(
        client, base_url="https://localhost", headers={"Referer": "https://localhost/auth/signin"}
    )
    assert r.status_code == 302, r.headers.get("Location")
    [cookie] = set_cookies(r)
    assert cookie.startswith("__Secure-auth.session-token=")
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    body = client.get("/auth/session", base_url="https://localhost").json
    assert body["user"]["email"] == "ann@example.com"


def test_cookie_expires_matches_the_row(app, client, auth):
    with freeze_time(START):
        r = auth.signin()
    [cookie] = set_cookies(r)
    assert "Expires=Tue, 31 Mar 2026 12:00:00 GMT" in cookie
    [row] = session_rows(app)
    assert row.expires == START + timedelta(days=30)


def test_the_database_holds_only_the_hash_of_the_cookie(app, client, auth):
    auth.signin()
    token = auth.session_cookie()
    assert token and len(token) >= 43
    [row] = session_rows(app)
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    with app.app_context():
        for table in db.metadata.sorted_tables:
            for values in db.session.execute(sa.select(table)).all():
                assert not any(token in str(v) for v in values), table.name


def test_every_signin_gets_a_new_token_and_replaces_the_old_session(app, client, auth):
    auth.signin()
    first = auth.session_cookie()
    auth.signin()
    second = auth.session_cookie()
    assert first != second
    rows = session_rows(app)
    assert [r.token_hash for r in rows] == [hashlib.sha256(second.encode()).hexdigest()]


def test_update_age_boundary(app, client, auth, count_sql):
    with freeze_time(START):
        auth.signin()
    token = auth.session_cookie()

    # Just before one day: no write, no Set-Cookie, expires unchanged.
    with freeze_time(START + DAY - timedelta(seconds=1)), count_sql() as sql:
        r = client.get("/auth/session")
    assert r.json["expires"] == "2026-03-31T12:00:00.000Z"
    assert sql.writes == []
    assert set_cookies(r) == []

    # Just after one day: exactly one UPDATE and its record in the audit trail (one INSERT),
    # the cookie re-sent with the new expiry.
    later = START + DAY + timedelta(seconds=1)
    with freeze_time(later), count_sql() as sql:
        r = client.get("/auth/session")
    assert [w.split()[:3] for w in sql.writes] == [
        ["UPDATE", "sessions", "SET"],
        ["INSERT", "INTO", "auth_events"],
    ], sql.writes
    assert r.json["expires"] == "2026-04-01T12:00:01.000Z"
    [cookie] = set_cookies(r)
    assert cookie.startswith(f"auth.session-token={token};")
    assert "Expires=Wed, 01 Apr 2026 12:00:01 GMT" in cookie
    [row] = session_rows(app)
    assert row.last_active_at == later
    assert row.expires == later + timedelta(days=30)

    # Right after the extension: quiet again.
    with freeze_time(later + timedelta(hours=1)), count_sql() as sql:
        r = client.get("/auth/session")
    assert sql.writes == [] and set_cookies(r) == []


def test_a_session_read_is_one_sql_statement(client, auth, count_sql):
    auth.signin()
    with count_sql() as sql:
        r = client.get("/auth/session")
    assert r.json["user"]["email"] == "ann@example.com"
    assert len(sql.statements) == 1, sql.statements
    assert sql.statements[0].lstrip().upper().startswith("SELECT")


def test_the_hot_read_returns_the_rows_sqlalchemy_would(app, auth):
    # On PostgreSQL HotSelect runs on the driver directly; its rows must not differ from
    # the Core statement's (types, UTC-aware timestamps), nor miss or invent a session.
    auth.signin()
    params = {"token_hash": hashlib.sha256(auth.session_cookie().encode()).hexdigest()}
    with app.app_context():
        hot = _READ.first(params)
        core = db.session.execute(_READ.statement, params).first()
        assert tuple(hot) == tuple(core)
        assert hot.expires.tzinfo == UTC and hot.created_at.tzinfo == UTC
        assert hot._fields == tuple(core._fields)
        assert _READ.first({"token_hash": "0" * 64}) is None


def test_signed_out_read_runs_no_sql(client, count_sql):
    with count_sql() as sql:
        assert client.get("/auth/session").json is None
    assert sql.statements == []


def test_expired_session_is_deleted_when_presented(app, client, auth):
    with freeze_time(START):
        auth.signin()
    token = auth.session_cookie()
    with freeze_time(START + timedelta(days=30, seconds=1)):
        # The browser would drop the cookie itself; a stale client still sends it.
        client.set_cookie("auth.session-token", token)
        r = client.get("/auth/session")
    assert r.json is None
    [cookie] = set_cookies(r)
    assert cookie.startswith("auth.session-token=;") and "Max-Age=0" in cookie
    assert session_rows(app) == []


def test_unknown_token_gets_null_and_a_cleared_cookie(client):
    client.set_cookie("auth.session-token", "not-a-real-token")
    r = client.get("/auth/session")
    assert r.json is None
    [cookie] = set_cookies(r)
    assert "Max-Age=0" in cookie


def test_absurdly_long_token_is_refused_without_a_lookup(client, count_sql):
    client.set_cookie("auth.session-token", "x" * 3000)
    with count_sql() as sql:
        assert client.get("/auth/session").json is None
    assert sql.statements == []


def test_signout_deletes_the_row_and_clears_the_cookie(app, client, auth):
    auth.signin()
    assert len(session_rows(app)) == 1
    r = auth.signout(callbackUrl="/bye")
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/bye"
    [cookie] = set_cookies(r)
    assert "Max-Age=0" in cookie
    assert session_rows(app) == []
    assert client.get("/auth/session").json is None


def test_signout_without_a_session_just_redirects(client, auth):
    r = auth.signout()
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/"


def test_login_required_redirects_to_signin_with_callback(client):
    r = client.get("/account?tab=sessions")
    assert r.status_code == 302
    assert r.headers["Location"] == (
        "http://localhost/auth/signin?error=SessionRequired"
        "&callbackUrl=http%3A%2F%2Flocalhost%2Faccount%3Ftab%3Dsessions"
    )


def test_current_user_comes_from_the_database_session(client, auth):
    assert b"You are not signed in" in client.get("/").data
    auth.signin("bob@example.com")
    page = client.get("/").get_data(as_text=True)
    assert "bob@example.com" in page
    assert client.get("/account").status_code == 200


def test_deleting_the_user_cascades_to_sessions(app, client, auth):
    auth.signin()
    with app.app_context():
        db.session.execute(sa.text("DELETE FROM users"))
        db.session.commit()
    assert session_rows(app) == []
    assert client.get("/auth/session").json is None


def test_active_sessions_view_shows_live_sessions_without_the_hash(
    app, client, auth, session_factory
):
    auth.signin("ann@example.com")
    with app.app_context():
        rows = db.session.execute(sa.text("SELECT * FROM active_sessions")).mappings().all()
    session_factory(
        app, rows[0]["user_id"], expires=datetime.now(UTC) - DAY, ip="192.0.2.1", provider="demo"
    )
    with app.app_context():
        rows = db.session.execute(sa.text("SELECT * FROM active_sessions")).mappings().all()
    assert len(rows) == 1
    row = rows[0]
    assert row["user_email"] == "ann@example.com"
    assert row["provider"] == "demo"
    assert row["ip"] == "127.0.0.1"
    assert "token_hash" not in row
    assert set(row) >= {"created_at", "last_active_at", "expires", "user_agent"}


def test_sql_count_headers_report_the_hot_read(make_app):
    # The benchmark's per-request counts (SQL_COUNT_HEADERS) come from these headers; the
    # hot read runs past SQLAlchemy on PostgreSQL and must still be counted, as one read.
    client = make_app(SQL_COUNT_HEADERS="true").test_client()
    r = client.get("/auth/session")
    assert (r.headers["X-SQL-Statements"], r.headers["X-SQL-Writes"]) == ("0", "0")
    assert int(demo_sign_in(client).headers["X-SQL-Writes"]) >= 1
    r = client.get("/auth/session")
    assert r.json["user"]["email"] == "ann@example.com"
    assert (r.headers["X-SQL-Statements"], r.headers["X-SQL-Writes"]) == ("1", "0")
