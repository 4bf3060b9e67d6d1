"""Session limits: the absolute lifetime and the cap on sessions per user."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from webapp import create_app
from webapp.sessions.store import create_session, hash_token
from webapp.settings import ConfigError, load_settings
from webapp.storage.db import db
from webapp.storage.models import Session, User

from .support.config import base_config
from .support.signin import AuthActions, demo_sign_in

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DAY = timedelta(days=1)
ABSOLUTE = 90 * DAY


def session_cookies(response):
    return [h for h in response.headers.getlist("Set-Cookie") if "session-token" in h]


def cookie_expires(header: str) -> datetime:
    value = next(p for p in header.split("; ") if p.startswith("Expires="))
    return parsedate_to_datetime(value.removeprefix("Expires="))


def rows(app, **where):
    with app.app_context():
        query = sa.select(Session).filter_by(**where).order_by(Session.id)
        return db.session.scalars(query).all()


def user_id(app, email="ann@example.com") -> int:
    with app.app_context():
        return db.session.execute(sa.select(User.id).where(User.email == email)).scalar_one()


# -- absolute lifetime --------------------------------------------------------------------


def test_a_session_read_every_day_ends_at_day_90(app, client, auth, count_sql):
    # One frozen clock, moved along: entering freeze_time afresh for each of the 180 reads
    # costs seconds (it patches every module loaded).
    with freeze_time(START) as clock:
        r = auth.signin()
        [cookie] = session_cookies(r)
        assert cookie_expires(cookie) == START + 30 * DAY
        token = auth.session_cookie()

        for day in range(1, 90):
            # Each daily read is due for an extension: one SELECT and one UPDATE, and while the
            # expiry moves (to day 60) its record in the audit trail, one INSERT in the UPDATE's
            # transaction (SQLite's BEGIN IMMEDIATE is its only other statement).
            clock.move_to(START + day * DAY)
            with count_sql() as sql:
                r = client.get("/auth/session")
            assert r.json is not None, day
            kinds = [s.split()[0].upper() for s in sql.statements if s != "BEGIN IMMEDIATE"]
            moved = ["INSERT"] if day <= 60 else []
            assert kinds == ["SELECT", "UPDATE", *moved], (day, sql.statements)
            expires = min(START + (day + 30) * DAY, START + ABSOLUTE)
            assert r.json["expires"] == expires.isoformat()[:19] + ".000Z", day
            sent = session_cookies(r)
            # The expiry stops moving at the absolute end (day 60 reaches it): from then on the
            # cookie is not re-sent, and its Expires never passes created_at + 90 days.
            assert len(sent) == (1 if day <= 60 else 0), day
            for header in sent:
                assert cookie_expires(header) == expires <= START + ABSOLUTE, day
            # Later the same day: the hot read, one statement and no write, even near the end.
            clock.move_to(START + day * DAY + timedelta(hours=1))
            with count_sql() as sql:
                r = client.get("/auth/session")
            assert r.json is not None and session_cookies(r) == []
            assert len(sql.statements) == 1 and sql.writes == [], (day, sql.statements)

        [row] = rows(app)
        assert row.expires == START + ABSOLUTE
        assert row.last_active_at == START + 89 * DAY  # activity still recorded near the end

        clock.move_to(START + ABSOLUTE - timedelta(seconds=1))
        assert client.get("/auth/session").json is not None
        clock.move_to(START + ABSOLUTE)
        # The browser drops the cookie at its Expires; a stale client still sends it.
        client.set_cookie("auth.session-token", token)
        r = client.get("/auth/session")
        assert r.json is None
        [cleared] = session_cookies(r)
        assert "Max-Age=0" in cleared
        assert rows(app) == []


def test_the_absolute_lifetime_is_a_setting(make_app):
    app = make_app(AUTH_SESSION_MAX_AGE_ABSOLUTE="172800")  # two days
    client = app.test_client()
    auth = AuthActions(client)
    with freeze_time(START):
        r = auth.signin()
    token = auth.session_cookie()
    # Shorter than the 30-day max age: the session is born with its absolute end.
    [cookie] = session_cookies(r)
    assert cookie_expires(cookie) == START + 2 * DAY
    with freeze_time(START + DAY):
        r = client.get("/auth/session")
    assert r.json["expires"] == "2026-03-03T12:00:00.000Z" and session_cookies(r) == []
    with freeze_time(START + 2 * DAY - timedelta(seconds=1)):
        assert client.get("/auth/session").json is not None
    with freeze_time(START + 2 * DAY):
        client.set_cookie("auth.session-token", token)
        assert client.get("/auth/session").json is None
    assert rows(app) == []


def test_lowering_the_setting_ends_longer_sessions_already_issued(make_app):
    first = make_app()
    auth = AuthActions(first.test_client())
    with freeze_time(START):
        auth.signin()
    token = auth.session_cookie()
    later = make_app(AUTH_SESSION_MAX_AGE_ABSOLUTE=str(3 * 86400)).test_client()
    later.set_cookie("auth.session-token", token)
    with freeze_time(START + 3 * DAY - timedelta(seconds=1)):
        assert later.get("/auth/session").json is not None
    with freeze_time(START + 3 * DAY):
        later.set_cookie("auth.session-token", token)  # its Expires moved to the new end
        assert later.get("/auth/session").json is None
    assert rows(first) == []


def test_cleanup_removes_sessions_past_their_absolute_end(app, client, auth, runner):
    # expires never passes created_at + absolute, so the expiry-based cleanup covers it.
    with freeze_time(START):
        auth.signin()
    for day in range(20, 90, 20):
        with freeze_time(START + day * DAY):
            client.get("/auth/session")
    [row] = rows(app)
    assert row.expires == START + ABSOLUTE
    with freeze_time(START + ABSOLUTE):
        result = runner.invoke(args=["auth", "cleanup"])
    assert result.exit_code == 0, result.output
    assert rows(app) == []


@pytest.mark.parametrize("value", ["90d", "0", "-5", "1.5", "99999999999"])
def test_a_bad_absolute_lifetime_names_the_setting(value):
    env = {"APP_ENV": "development", "AUTH_SESSION_MAX_AGE_ABSOLUTE": value}
    with pytest.raises(ConfigError, match="AUTH_SESSION_MAX_AGE_ABSOLUTE"):
        load_settings(env, instance_path="/tmp/webapp-test-instance")


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_session_cap_names_the_setting(value):
    env = {"APP_ENV": "development", "AUTH_MAX_SESSIONS_PER_USER": value}
    with pytest.raises(ConfigError, match="AUTH_MAX_SESSIONS_PER_USER"):
        load_settings(env, instance_path="/tmp/webapp-test-instance")


def test_limits_default_and_come_from_the_toml_file(tmp_path):
    conf = load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    assert conf.session_max_age_absolute == ABSOLUTE and conf.max_sessions_per_user == 50
    path = tmp_path / "auth.toml"
    path.write_text("[auth]\nsession_max_age_absolute = 604800\nmax_sessions_per_user = 5\n")
    conf = load_settings(
        {"APP_ENV": "development", "AUTH_CONFIG": str(path)}, instance_path=tmp_path
    )
    assert conf.session_max_age_absolute == timedelta(days=7)
    assert conf.max_sessions_per_user == 5


# -- sessions per user --------------------------------------------------------------------


def fresh_signin(client, email="ann@example.com"):
    """Sign in as a new browser would: without this client's previous session cookie."""
    client.delete_cookie("auth.session-token")
    r = demo_sign_in(client, email)
    assert r.status_code == 302
    return client.get_cookie("auth.session-token").value


def test_51_sign_ins_leave_50_sessions_and_end_the_least_recently_used(app, count_sql):
    other = app.test_client()
    with freeze_time(START - timedelta(hours=1)):
        bob_token = fresh_signin(other, "bob@example.com")

    first = app.test_client()
    churn = app.test_client()
    with freeze_time(START):
        first_token = fresh_signin(first)  # the oldest session
    tokens = {}
    with freeze_time(START) as clock:  # one clock, moved: a new freeze_time each costs ~20 ms
        for i in range(1, 50):
            clock.move_to(START + i * timedelta(minutes=1))
            tokens[i] = fresh_signin(churn)
    ann = user_id(app)
    assert len(rows(app, user_id=ann)) == 50

    # The oldest session is used again (a day later, so the read records it): now the least
    # recently used is the second one signed in.
    with freeze_time(START + DAY + timedelta(hours=1)):
        assert first.get("/auth/session").json is not None
    with freeze_time(START + DAY + timedelta(hours=2)), count_sql() as sql:
        newest = fresh_signin(churn)
    # The cap costs the sign-in one statement.
    assert sum(" NOT IN " in s.upper() for s in sql.writes) == 1

    left = {r.token_hash for r in rows(app, user_id=ann)}
    assert len(left) == 50
    assert hash_token(tokens[1]) not in left
    assert {hash_token(first_token), hash_token(newest), hash_token(tokens[2])} <= left
    # Other users' sessions are not touched.
    assert [r.token_hash for r in rows(app, user_id=user_id(app, "bob@example.com"))] == [
        hash_token(bob_token)
    ]
    ended = app.test_client()
    ended.set_cookie("auth.session-token", tokens[1])
    with freeze_time(START + DAY + timedelta(hours=3)):
        assert ended.get("/auth/session").json is None
        assert first.get("/auth/session").json is not None


def test_the_cap_is_a_setting_and_expired_sessions_do_not_count(make_app, session_factory):
    app = make_app(AUTH_MAX_SESSIONS_PER_USER="3")
    client = app.test_client()
    with freeze_time(START):
        a = fresh_signin(client)
    with freeze_time(START + timedelta(minutes=1)):
        b = fresh_signin(client)
    ann = user_id(app)
    # An expired row, more recently active than both: an ended session, not a slot.
    session_factory(
        app, ann, expires=START, created_at=START, last_active_at=START + timedelta(hours=1)
    )
    with freeze_time(START + timedelta(hours=2)):
        c = fresh_signin(client)
    assert {r.token_hash for r in rows(app, user_id=ann)} == {hash_token(t) for t in (a, b, c)}
    with freeze_time(START + timedelta(hours=3)):
        fresh_signin(client)
    assert hash_token(a) not in {r.token_hash for r in rows(app, user_id=ann)}
    assert len(rows(app, user_id=ann)) == 3


def test_a_cap_of_one_keeps_only_the_newest_sign_in(make_app):
    app = make_app(AUTH_MAX_SESSIONS_PER_USER="1")
    one, two = app.test_client(), app.test_client()
    with freeze_time(START):
        fresh_signin(one)
    with freeze_time(START + timedelta(minutes=1)):
        newest = fresh_signin(two)
    assert [r.token_hash for r in rows(app)] == [hash_token(newest)]
    with freeze_time(START + timedelta(minutes=2)):
        assert one.get("/auth/session").json is None
        assert two.get("/auth/session").json is not None


def test_concurrent_sign_ins_never_end_a_session_the_cap_keeps(
    postgres_url, user_factory, session_factory
):
    # Two sign-ins of one user at once on PostgreSQL (READ COMMITTED): the second's DELETE
    # runs while the first is uncommitted, so neither sees the other's new session. Both
    # pick the same least recently used victim; the user briefly holds one session more
    # than the cap rather than losing one the cap would keep.
    app = create_app(base_config(postgres_url, AUTH_MAX_SESSIONS_PER_USER="3"), environ={})
    try:
        uid = user_factory(app, email="ann@example.com")
        old = [
            session_factory(
                app,
                uid,
                expires=START + 400 * DAY,
                created_at=START,
                last_active_at=START + i * timedelta(minutes=1),
            ).id
            for i in range(3)
        ]

        created: dict[str, int] = {}
        first_done, release = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def sign_in(name: str, hold: bool) -> None:
            try:
                with app.test_request_context("/auth/callback/demo", method="POST"):
                    created[name] = create_session(uid, provider="demo", amr=("pwd",)).id
                    if hold:
                        first_done.set()
                        release.wait(10)
                    db.session.commit()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                first_done.set()

        one = threading.Thread(target=sign_in, args=("one", True))
        one.start()
        assert first_done.wait(10)
        two = threading.Thread(target=sign_in, args=("two", False))
        two.start()
        # Wait until the second DELETE is blocked on the row the first one deleted.
        with app.app_context():
            for _ in range(200):
                waiting = db.session.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                ).scalar_one()
                db.session.rollback()
                if waiting:
                    break
                time.sleep(0.05)
        assert waiting == 1
        release.set()
        one.join(10)
        two.join(10)
        assert not errors, errors
        with app.app_context():
            left = set(db.session.scalars(sa.select(Session.id).where(Session.user_id == uid)))
        assert left == {old[1], old[2], created["one"], created["two"]}
    finally:
        with app.app_context():
            db.engine.dispose()
