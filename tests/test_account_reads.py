"""How the account page reads and writes what it shows: few statements, none through the
request's transaction unless it has one, and dates as Babel writes them.

The page's reads are ``database.HotSelect`` statements (on PostgreSQL straight on the
driver, outside any transaction); while a request has its own transaction open (a section
re-rendered after a change, not yet committed), they run in it and see the change.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from babel import Locale
from babel.dates import format_datetime, format_skeleton
from flask import Flask

from webapp import i18n
from webapp.audit import trail as audit
from webapp.flows.account import account_page, two_factor
from webapp.storage.database import read_together
from webapp.storage.db import db
from webapp.storage.models import AuthEvent, Session, User


def _user_id(app: Flask, email: str = "ann@example.com") -> int:
    with app.app_context():
        return int(db.session.scalars(db.select(User.id).where(User.email == email)).one())


def test_the_account_page_is_six_selects_and_writes_nothing(client, auth, count_sql):
    auth.signin()
    with count_sql() as sql:
        r = client.get("/account")
    assert r.status_code == 200 and b"ann@example.com" in r.data
    # The session read, then the user with their second factors, sign-in methods,
    # passkeys, sessions and recent activity: each one SELECT.
    assert len(sql.statements) == 6, sql.statements
    assert all(s.lstrip().upper().startswith("SELECT") for s in sql.statements)
    assert sql.writes == []


def test_the_page_reads_return_the_rows_sqlalchemy_would(app, auth):
    auth.signin()
    user_id = _user_id(app)
    reads = {
        account_page._PAGE_USER: {"user_id": user_id},
        account_page._PAGE_ACCOUNTS: {"user_id": user_id},
        account_page._PAGE_PASSKEYS: {"user_id": user_id},
        account_page._PAGE_SESSIONS: {"user_id": user_id, "now": datetime.now(UTC)},
        two_factor._STATUS: {"user_id": user_id},
        audit._FIRST_PAGE: {"user_id": user_id, "limit": 21},
    }
    with app.app_context():
        for hot, params in reads.items():
            rows = hot.all(params)
            core = db.session.execute(hot.statement, params).all()
            db.session.rollback()
            assert [tuple(r) for r in rows] == [tuple(r) for r in core], hot.statement
            # Ann has no passkey; every other read has something to compare.
            assert rows or hot is account_page._PAGE_PASSKEYS, hot.statement
        # Together (one round trip on PostgreSQL) as one after another.
        assert read_together(*reads.items()) == [hot.all(p) for hot, p in reads.items()]
        # The constants of the statement (the event types a person is not shown) went
        # with it: an event of such a type is never listed.
        assert all(
            r.type not in {e.value for e in audit.NOT_SHOWN_TO_PEOPLE}
            for r in audit._FIRST_PAGE.all({"user_id": user_id, "limit": 100})
        )


def test_a_read_inside_an_open_transaction_sees_its_uncommitted_change(app, auth):
    auth.signin()
    user_id = _user_id(app)
    params = {"user_id": user_id, "now": datetime.now(UTC)}
    with app.test_request_context():
        [before] = account_page._PAGE_SESSIONS.all(params)
        db.session.execute(db.delete(Session).where(Session.id == before.id))
        assert db.session().in_transaction()
        assert account_page._PAGE_SESSIONS.all(params) == []
        db.session.rollback()
        assert [r.id for r in account_page._PAGE_SESSIONS.all(params)] == [before.id]


@pytest.mark.parametrize("code", i18n.shipped_locales())
def test_moments_and_days_read_as_babel_writes_them(code):
    """Days and times of day are formatted apart and cached; joined, they must equal
    Babel's own formatting of the whole pattern, in every shipped language."""
    locale = Locale.parse(code)
    formats = i18n._formats(locale)
    pattern = str(locale.datetime_formats["medium"]).replace("{1}", formats.day)
    pattern = pattern.replace("{0}", formats.time)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # Every 7,919 minutes over 400 days: every hour, every month, both halves of the day.
    for step in range(0, 400 * 24 * 60, 7919):
        moment = start + timedelta(minutes=step)
        assert i18n._moment(formats, moment) == (
            format_datetime(moment, pattern, tzinfo=UTC, locale=locale) + " UTC"
        )
        assert i18n._day(formats, moment) == format_skeleton(
            i18n.DAY_SKELETON, moment, tzinfo=UTC, locale=locale
        )


def test_recent_activity_pages_through_every_event_once(app, auth):
    """The next page starts right after the last one shown, on both databases: times with
    microseconds, several events in the same second and in the same microsecond."""
    auth.signin()
    user_id = _user_id(app)
    start = datetime(2026, 5, 1, 9, 30, 15, 250_000, tzinfo=UTC)
    with app.app_context():
        db.session.add_all(
            AuthEvent(
                occurred_at=start + timedelta(microseconds=1_000 * (n // 3)),
                type="signin",
                outcome="success",
                user_id=user_id,
                provider="demo",
            )
            for n in range(45)
        )
        db.session.commit()
        expected = list(
            db.session.scalars(
                db.select(AuthEvent.id)
                .where(
                    AuthEvent.user_id == user_id,
                    AuthEvent.type.not_in([e.value for e in audit.NOT_SHOWN_TO_PEOPLE]),
                )
                .order_by(AuthEvent.occurred_at.desc(), AuthEvent.id.desc())
            )
        )
    with app.test_request_context():
        seen: list[int] = []
        before = None
        for _ in range(10):  # three pages and an empty one; a page read again fails below
            page = audit.for_user(user_id, before=before, limit=20)
            if not page:
                break
            seen += [row.id for row in page]
            before = page[-1].id
    assert len(expected) > 45 and seen == expected


def test_the_overview_reads_the_same_activity_as_its_own_page(app, auth):
    """``account_overview(activity=n)`` sends the activity read with the page's others (one
    round trip on PostgreSQL): the same entries, and the same start of the next page, as
    ``recent_activity`` reading it alone; without ``activity`` it reads none."""
    auth.signin()
    user_id = _user_id(app)
    with app.app_context():
        db.session.add_all(
            AuthEvent(
                occurred_at=datetime.now(UTC), type="signout", outcome="success", user_id=user_id
            )
            for _ in range(4)
        )
        db.session.commit()
    with app.test_request_context():
        [session] = db.session.scalars(db.select(Session).where(Session.user_id == user_id))
        for limit in (1, 5, 50):
            overview = account_page.account_overview(
                user_id=user_id, session=session, activity=limit
            )
            alone = account_page.recent_activity(user_id=user_id, limit=limit)
            assert overview.activity == alone and alone.entries
            assert (alone.more is None) == (limit == 50)
        assert account_page.account_overview(user_id=user_id, session=session).activity is None
