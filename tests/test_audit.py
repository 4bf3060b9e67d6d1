"""The audit trail (docs/audit.md): every event type, no secret in it, the same transaction
as the change, a refusal kept through a rollback, retention, the DBA's view, "Recent
activity" on the account page and ``flask auth events``."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp.audit.trail import Event, subject_hash
from webapp.audit.user_agents import describe_device, device_label
from webapp.settings import ConfigError, load_settings
from webapp.storage.db import db
from webapp.storage.models import RecoveryCode, Session, User

from .support.audit import (
    CHROME_MAC,
    FIREFOX,
    HTMX,
    WRONG_PASSWORD,
    csrf_post,
    events,
    sign_in,
    types,
    user_id,
)
from .support.config import TEST_SECRET
from .support.every_event import GUESSED, drive_every_event
from .support.mail import EmailActions, Mailbox
from .support.rows import row_count
from .support.second_factor import (
    enrol_authenticator,
    submit_second_factor,
)
from .support.signin import demo_sign_in
from .support.sql_counter import SqlCounter, counting_sql


def table_dump(app: Flask) -> str:
    """Every row of the trail and of its view, as stored."""
    with app.app_context(), db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM auth_events")).all()
        view = conn.execute(sa.text("SELECT * FROM auth_events_readable")).all()
    return repr(rows) + repr(view)


# -- every event, and no secret ---------------------------------------------------------


def test_every_event_type_is_recorded_and_the_table_holds_no_secret(
    password_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app, found = drive_every_event(password_app, mailbox)

    assert set(types(app)) == set(Event), set(Event) - set(types(app))
    dump = table_dump(app)
    leaked = found.leaked(dump)
    assert leaked == set(), leaked


# -- what each write costs, and the transaction it is in ----------------------------------


counting = counting_sql  # conftest's count_sql fixture is the ``app`` fixture's


def test_a_refused_sign_in_is_one_insert(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    client = app.test_client()
    csrf = client.get("/auth/csrf").json["csrfToken"]
    form = {"csrfToken": csrf, "email": GUESSED, "password": WRONG_PASSWORD}
    with counting(app) as sql:
        answer = client.post("/auth/callback/password", data=form)
    assert "error=CredentialsSignin" in answer.location
    writes = [w for w in _writes(sql) if "rate_limit_counters" not in w]
    assert len(writes) == 1 and writes[0].startswith("INSERT INTO auth_events"), writes
    [event] = events(app)
    assert (event.type, event.outcome, event.error_code) == (
        "signin",
        "failure",
        "CredentialsSignin",
    )
    assert (event.user_id, event.subject_hash) == (None, _hash(app, GUESSED))


def _writes(sql: SqlCounter) -> list[str]:
    return [" ".join(w.split()) for w in sql.writes]


def _hash(app: Flask, identifier: str) -> str:
    with app.app_context():
        return subject_hash(identifier)


def test_a_failure_stays_on_record_when_the_request_is_rolled_back(
    password_app: Callable[..., Flask],
) -> None:
    """The sign-in hook refuses after the user and account were written: the error handler
    discards them, and with them their events, but keeps the refusal."""
    app = password_app()
    app.extensions["webapp.hooks"].signin = lambda **_: False
    answer = sign_in(app.test_client(), "ann@example.com")
    assert "error=AccessDenied" in answer.location
    assert row_count(app, User) == 0
    [event] = events(app)
    assert (event.type, event.error_code, event.provider) == ("signin", "AccessDenied", "password")


def test_nothing_is_recorded_that_did_not_happen(password_app: Callable[..., Flask]) -> None:
    """A request that fails unexpectedly after the sign-in wrote its events leaves none."""
    app = password_app()

    def broken(**_: Any) -> bool:
        raise RuntimeError("the application's hook is broken")

    app.extensions["webapp.hooks"].signin = broken
    assert sign_in(app.test_client(), "ann@example.com").status_code == 500
    assert row_count(app, User) == 0 and events(app) == []


def test_a_refusal_is_recorded_with_the_writes_that_stand(email_app: Callable[..., Flask]) -> None:
    """The fifth wrong code burns the request (its writes stand: ``keep``): the lockout is
    written with them, once; the four wrong codes before it each once too."""
    app = email_app()
    mail = EmailActions(app.test_client())
    mail.request_link("ann@example.com")
    for _ in range(5):
        mail.enter_code("ZZZZZZZZ")
    trail = events(app)
    assert [e.type for e in trail] == ["email.requested"] + ["code.failed"] * 4 + ["code.lockout"]
    assert [e.detail["tries_left"] for e in trail[1:5]] == [4, 3, 2, 1]
    assert {e.subject_hash for e in trail} == {_hash(app, "ann@example.com")}
    assert trail[-1].error_code == "Verification"


def test_a_session_extension_is_recorded_with_the_extension(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    client = app.test_client()
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with freeze_time(start):
        sign_in(client, "ann@example.com")
    with freeze_time(start + timedelta(hours=23)):
        client.get("/auth/session")
    assert types(app) == ["account.created", "account.linked", "signin"]
    with freeze_time(start + timedelta(days=1, seconds=1)):
        client.get("/auth/session")
    extended = events(app)[-1]
    with app.app_context():
        session_id = db.session.scalar(sa.select(Session.id))
    assert extended.type == "session.extended" and extended.detail == {"session": session_id}
    assert extended.occurred_at == start + timedelta(days=1, seconds=1)


def test_what_a_row_says(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    client = app.test_client()
    answer = sign_in(
        client,
        "ann@example.com",
        headers={"User-Agent": FIREFOX, "X-Request-ID": "req-0123456789"},
        environ_base={"REMOTE_ADDR": "203.0.113.9"},
    )
    assert answer.status_code == 302
    signin = events(app, type="signin")[0]
    assert signin.user_id == user_id(app, "ann@example.com") and signin.subject_hash is None
    assert (signin.provider, signin.outcome, signin.error_code) == ("password", "success", None)
    assert (signin.ip, signin.device, signin.request_id) == (
        "203.0.113.9",
        "Firefox on Linux",
        "req-0123456789",
    )
    assert signin.detail is not None and signin.detail["amr"] == "pwd"
    assert signin.detail["new_user"] is True and signin.detail["replaced"] is None
    assert abs(signin.occurred_at - datetime.now(UTC)) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("agent", "described", "label"),
    [
        (FIREFOX, "Firefox 130 on Linux", "Firefox on Linux"),
        (CHROME_MAC, "Chrome 156 on Mac OS X", "Chrome on Mac OS X"),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/156.0.0.0 Safari/537.36",
            "Chrome 156 on Windows",
            "Chrome on Windows",
        ),
        # Phones and tablets are named by the device, not the system.
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mobile Safari 17 on iPhone",
            "Mobile Safari on iPhone",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/126.0.0.0 Mobile Safari/537.36",
            "Chrome Mobile 126 on Pixel 8",
            "Chrome Mobile on Pixel 8",
        ),
        (
            "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
            "Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mobile Safari 17 on iPad",
            "Mobile Safari on iPad",
        ),
        (
            "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/126.0.0.0 Safari/537.36",
            "Chrome 126 on SM-X710",
            "Chrome on SM-X710",
        ),
        (
            "Mozilla/5.0 (Linux; U; Android 4.0.3; en-us; KFTT Build/IML74K) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Silk/3.68 like Chrome/39.0.2171.93 Safari/537.36",
            "Amazon Silk 3 on Kindle Fire HD",
            "Amazon Silk on Kindle Fire HD",
        ),
        (
            "Nokia6300/2.0 (05.00) Profile/MIDP-2.0 Configuration/CLDC-1.1",
            "Nokia Services (WAP) Browser on Nokia 6300",
            "Nokia Services (WAP) Browser on Nokia 6300",
        ),
        # Bots: the crawler's name, and a mobile crawler's device.
        (
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Googlebot 2",
            "Googlebot",
        ),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/126.0.6478.126 Mobile Safari/537.36 (compatible; "
            "Googlebot/2.1; +http://www.google.com/bot.html)",
            "Googlebot 2 on Spider",
            "Googlebot on Spider",
        ),
        ("curl/8.5.0", "curl 8", "curl"),
        ("flask auth device-login", "Unknown device", "Unknown device"),
        ("", "Unknown device", "Unknown device"),
    ],
)
def test_devices_are_named_by_browser_and_system_or_device(
    app: Flask, agent: str, described: str, label: str
) -> None:
    with app.test_request_context():
        assert (describe_device(agent), device_label(agent)) == (described, label)


# -- the second factor ---------------------------------------------------------------------

TWO_STEP = {
    Event.SECOND_FACTOR_ON,
    Event.SECOND_FACTOR_OFF,
    Event.RECOVERY_CODE_USED,
    Event.RECOVERY_CODES_REPLACED,
}


def test_the_second_factor_and_its_recovery_codes_are_recorded(
    password_app: Callable[..., Flask],
) -> None:
    """Turned on, a recovery code standing in at a sign-in (how many are left, never which
    code), new codes, turned off: each a row of the user's, from the request that did it."""
    app = password_app()
    ann = app.test_client()
    sign_in(ann, "ann@example.com")
    ann_id = user_id(app, "ann@example.com")
    _, codes = enrol_authenticator(ann)
    rescued = app.test_client()
    sign_in(rescued, "ann@example.com")
    assert submit_second_factor(rescued, codes[3].upper()).status_code == 302
    assert csrf_post(ann, "/account/two-factor/recovery-codes").status_code == 200
    assert csrf_post(ann, "/account/two-factor/off").status_code == 303

    mine = [e for e in events(app, user_id=ann_id) if e.type in TWO_STEP]
    assert [(e.type, e.outcome, e.error_code, e.detail) for e in mine] == [
        ("second_factor.on", "success", None, None),
        ("recovery.used", "success", None, {"left": 9}),
        ("recovery.replaced", "success", None, None),
        ("second_factor.off", "success", None, {"by": "user"}),
    ]
    assert all(e.device == "Unknown device" and e.ip for e in mine)
    # The recovery code's row is its sign-in's: the session it started is recorded after it.
    [*_, rescue] = events(app, user_id=ann_id, type="signin")
    assert rescue.request_id == mine[1].request_id and rescue.id > mine[1].id
    assert "rec" in str(rescue.detail["amr"]).split()  # type: ignore[index]


def test_a_second_factor_change_refused_records_nothing(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    ann = app.test_client()
    sign_in(ann, "ann@example.com")
    # Not on: nothing to turn off, no codes to replace; a wrong code leaves it off.
    assert csrf_post(ann, "/account/two-factor/off").status_code == 303
    assert csrf_post(ann, "/account/two-factor/recovery-codes").status_code == 303
    assert ann.get("/account/two-factor").status_code == 200
    assert csrf_post(ann, "/account/two-factor", code="000000").status_code == 400
    assert [t for t in types(app) if t in TWO_STEP] == []
    # On, then a sign-in's wrong code: a failed code, no recovery code used.
    enrol_authenticator(ann)
    held = app.test_client()
    sign_in(held, "ann@example.com")
    assert submit_second_factor(held, "aaaa-bbbb-cccc-dddd").status_code == 400
    assert [t for t in types(app) if t in {*TWO_STEP, "code.failed"}] == [
        "second_factor.on",
        "code.failed",
    ]


def test_a_recovery_code_is_recorded_in_the_transaction_that_spends_it(
    password_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sign-in that fails after its recovery code passed keeps the code unspent, and
    leaves no row saying it was used."""
    from webapp.flows.signin import second_factor as flow

    app = password_app()
    ann = app.test_client()
    sign_in(ann, "ann@example.com")
    _, codes = enrol_authenticator(ann)

    def broken(signin: object) -> str:
        raise RuntimeError("the session could not be started")

    monkeypatch.setattr(flow, "start_session", broken)
    failing = app.test_client()
    sign_in(failing, "ann@example.com")
    assert submit_second_factor(failing, codes[0]).status_code == 500
    assert "recovery.used" not in types(app)
    assert row_count(app, RecoveryCode, used_at=None) == 10
    monkeypatch.undo()
    again = app.test_client()
    sign_in(again, "ann@example.com")
    assert submit_second_factor(again, codes[0]).status_code == 302
    assert [e.detail for e in events(app, type="recovery.used")] == [{"left": 9}]
    assert row_count(app, RecoveryCode, used_at=None) == 9


def test_an_mfa_reset_by_the_operator_is_recorded_as_theirs(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    ann, bob = app.test_client(), app.test_client()
    sign_in(ann, "ann@example.com")
    enrol_authenticator(ann)
    sign_in(bob, "bob@example.com")
    runner = app.test_cli_runner()
    for email in ("ann@example.com", "bob@example.com"):
        assert runner.invoke(args=["auth", "mfa", "reset", "--user", email]).exit_code == 0
    [off] = events(app, type="second_factor.off")
    assert (off.user_id, off.detail) == (user_id(app, "ann@example.com"), {"by": "operator"})
    assert (off.ip, off.device, off.request_id) == (None, None, None)
    # Bob had no authenticator app: nothing of his was turned off.
    assert {*types(app, user_id=user_id(app, "bob@example.com"))} & TWO_STEP == set()


@pytest.mark.parametrize(
    ("language", "said"),
    [
        (
            "en",
            [
                "Two-step verification turned off by the site's administrators",
                "Two-step verification turned on",
                "Two-step verification turned off",
                "New recovery codes made: the old ones no longer work",
                "A recovery code was used to sign in: 9 left",
                "Two-step verification turned on",
            ],
        ),
        (
            "de",
            [
                "Bestätigung in zwei Schritten von den Administratoren der Website ausgeschaltet",
                "Bestätigung in zwei Schritten eingeschaltet",
                "Bestätigung in zwei Schritten ausgeschaltet",
                "Neue Wiederherstellungscodes erstellt: Die alten funktionieren nicht mehr",
                "Ein Wiederherstellungscode wurde zur Anmeldung verwendet: noch 9 übrig",
                "Bestätigung in zwei Schritten eingeschaltet",
            ],
        ),
        (
            "ar",
            [
                "أوقف مسؤولو الموقع التحقق بخطوتين",
                "فُعّل التحقق بخطوتين",
                "أُوقف التحقق بخطوتين",
                "أُنشئت رموز استرداد جديدة: ولم تعد الرموز القديمة تعمل",
                "استُخدم رمز استرداد لتسجيل الدخول: تبقّت 9 رموز",
                "فُعّل التحقق بخطوتين",
            ],
        ),
    ],
)
def test_recent_activity_tells_of_the_second_factor_in_the_page_s_language(
    password_app: Callable[..., Flask], language: str, said: list[str]
) -> None:
    app = password_app()
    ann = app.test_client()
    ann.environ_base["HTTP_ACCEPT_LANGUAGE"] = language
    sign_in(ann, "ann@example.com")
    _, codes = enrol_authenticator(ann)
    rescued = app.test_client()
    sign_in(rescued, "ann@example.com")
    submit_second_factor(rescued, codes[0])
    csrf_post(ann, "/account/two-factor/recovery-codes")
    csrf_post(ann, "/account/two-factor/off")
    enrol_authenticator(ann)
    reset = app.test_cli_runner().invoke(args=["auth", "mfa", "reset", "--user", "ann@example.com"])
    assert reset.exit_code == 0, reset.output
    sign_in(ann, "ann@example.com")
    # The activity page: more events than the account page's card shows.
    page = ann.get("/account/activity").get_data(as_text=True)
    what = [
        html.unescape(" ".join(re.sub(r"<[^>]+>", " ", item).split()))
        for item in re.findall(r'<span class="activity__what">(.*?)</span>\s*<span', page, re.S)
    ]
    shown = [e.type for e in reversed(events(app, user_id=user_id(app, "ann@example.com")))]
    assert len(what) == len(shown)
    assert [w for w, t in zip(what, shown, strict=True) if t in TWO_STEP] == said, what


def test_each_sign_out_records_the_session_it_ended(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    client = app.test_client()
    sign_in(client, "ann@example.com")
    sign_in(client, "ann@example.com")  # replaces this browser's session
    first, second = (e.detail["session"] for e in events(app, type="signin"))
    assert events(app, type="signin")[1].detail["replaced"] == first
    csrf_post(client, "/auth/signout")
    [signout] = events(app, type="signout")
    assert signout.detail == {"session": second} and signout.provider == "password"


def test_cleanup_counts_the_expired_sessions_in_one_row_per_batch(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with freeze_time(start):
        for _ in range(3):
            sign_in(app.test_client(), "ann@example.com")
    with freeze_time(start + timedelta(days=31)):
        result = app.test_cli_runner().invoke(args=["auth", "cleanup", "--batch-size", "2"])
    assert "deleted 3 expired session(s)" in result.output
    revoked = events(app, type="session.revoked")
    assert [e.detail for e in revoked] == [
        {"reason": "expired", "sessions": 2},
        {"reason": "expired", "sessions": 1},
    ]
    assert {(e.user_id, e.ip, e.request_id) for e in revoked} == {(None, None, None)}


def test_retention_deletes_what_is_older(make_app: Callable[..., Flask]) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    app = make_app()
    for days in (0, 100, 179, 200):
        with freeze_time(start + timedelta(days=days)):
            demo_sign_in(app.test_client(), password="wrong")  # one refusal: one event
    assert len(events(app)) == 4
    with freeze_time(start + timedelta(days=280)):
        result = app.test_cli_runner().invoke(args=["auth", "cleanup"])
    # Older than 180 days goes; exactly 180 days old (day 100) stays.
    assert "deleted 1 audit event(s) older than 180 days" in result.output
    assert [e.occurred_at for e in events(app)] == [
        start + timedelta(days=100),
        start + timedelta(days=179),
        start + timedelta(days=200),
    ]
    shorter = make_app(AUDIT_RETENTION="30")
    with freeze_time(start + timedelta(days=280)):
        result = shorter.test_cli_runner().invoke(args=["auth", "cleanup"])
    assert "deleted 3 audit event(s) older than 30 days" in result.output
    assert events(app) == []


def test_retention_setting_is_checked() -> None:
    base = {"APP_ENV": "development", "AUTH_SECRET": TEST_SECRET}
    assert load_settings(base).audit_retention == timedelta(days=180)
    assert load_settings({**base, "AUDIT_RETENTION": "7"}).audit_retention == timedelta(days=7)
    for bad in ("0", "-1", "1.5", "six months", "99999999"):
        with pytest.raises(ConfigError, match="AUDIT_RETENTION"):
            load_settings({**base, "AUDIT_RETENTION": bad})


def test_a_deleted_users_history_stays_and_names_nobody(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    client = app.test_client()
    sign_in(client, "ann@example.com")
    ann = user_id(app, "ann@example.com")
    assert csrf_post(client, "/account/delete", confirm="DELETE").status_code == 303
    trail = events(app)
    assert [e.type for e in trail] == [
        "account.created",
        "account.linked",
        "signin",
        "account.deleted",
    ]
    assert {e.user_id for e in trail} == {None}
    assert trail[-1].subject_hash == _hash(app, "ann@example.com")
    assert trail[-1].detail == {"sessions": 1}
    # A new user (on SQLite under ann's old id: the highest id is given again) sees none.
    newcomer = app.test_client()
    sign_in(newcomer, "bob@example.com")
    page = newcomer.get("/account").get_data(as_text=True)
    assert page.count('class="activity__item') == 3  # created, linked, signed in
    assert [e.user_id for e in events(app)].count(ann) in (0, 3)


def test_the_readable_view_names_the_user(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    sign_in(app.test_client(), "ann@example.com")
    sign_in(app.test_client(), GUESSED, WRONG_PASSWORD)
    with app.app_context(), db.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT type, outcome, error_code, user_email, subject_hash, provider "
                "FROM auth_events_readable ORDER BY id"
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        ("account.created", "success", None, "ann@example.com", None, "password"),
        ("account.linked", "success", None, "ann@example.com", None, "password"),
        ("signin", "success", None, "ann@example.com", None, "password"),
        ("signin", "failure", "CredentialsSignin", None, _hash(app, GUESSED), "password"),
    ]


def test_the_view_has_its_comment_on_postgres(postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        comment = conn.execute(
            sa.text("SELECT obj_description('auth_events_readable'::regclass, 'pg_class')")
        ).scalar()
        table = conn.execute(
            sa.text("SELECT obj_description('auth_events'::regclass, 'pg_class')")
        ).scalar()
    engine.dispose()
    assert "never a token" in comment and "append-only" in table


# -- "Recent activity" ------------------------------------------------------------------


def test_recent_activity_shows_the_latest_5_and_more_20_at_a_time(
    password_app: Callable[..., Flask],
) -> None:
    app = password_app()
    client = app.test_client()
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with freeze_time(start) as clock:  # one clock, moved: a new freeze_time each costs ~20 ms
        for minute in range(25):
            clock.move_to(start + timedelta(minutes=minute))
            sign_in(
                client,
                "ann@example.com",
                headers={"User-Agent": CHROME_MAC},
                environ_base={"REMOTE_ADDR": f"198.51.100.{minute}"},
            )
    later = freeze_time(start + timedelta(days=1, minutes=30))
    later.start()
    client.get("/auth/session")  # an extension: for operators, not shown here
    page = client.get("/account").get_data(as_text=True)
    card = page[page.index('id="activity"') :]
    items = _items(card)
    # The newest 5 sign-ins; the extension is not shown.
    assert [_octet(i) for i in items] == [24, 23, 22, 21, 20]
    assert all(i.startswith("Signed in with Password") for i in items)
    assert "Chrome on Mac OS X" in items[0]
    assert "Mar 1, 2026, 12:24 PM UTC" in items[0].replace("\u202f", " ")
    [more] = re.findall(r'<a href="(/account/activity\?before=\d+)" hx-get="\1"', card)

    # "Show more": the next 20, and another "Show more" for what is left.
    rest = client.get(more, headers=HTMX).get_data(as_text=True)
    assert "<html" not in rest
    assert [_octet(e) for e in _items(rest)] == list(range(19, -1, -1))
    [after] = re.findall(r'<a href="(/account/activity\?before=\d+)" hx-get="\1"', rest)
    last = client.get(after, headers=HTMX).get_data(as_text=True)
    assert "Show more" not in last
    entries = _items(last)
    # The first sign-in's request also created the account and linked the password.
    assert [_octet(e) for e in entries] == [0, 0]
    assert entries[0].startswith("Password added to your sign-in methods")
    assert entries[1].startswith("Account created with Password")

    plain = client.get(after).get_data(as_text=True)  # JavaScript off: a page of them
    later.stop()
    assert "<h1>Recent activity</h1>" in plain and _items(plain) == entries


def _items(html: str) -> list[str]:
    """The entries of an activity list, as text."""
    found = re.findall(r'<li class="activity__item[^"]*">(.*?)</li>', html, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", item).split()) for item in found]


def _octet(text: str) -> int:
    match = re.search(r"198\.51\.100\.(\d+)", text)
    assert match, text
    return int(match[1])


def test_recent_activity_shows_only_ones_own_events(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    ann, bob = app.test_client(), app.test_client()
    sign_in(ann, "ann@example.com")
    sign_in(bob, "bob@example.com")
    sign_in(app.test_client(), "ann@example.com", WRONG_PASSWORD)
    bobs_event = events(app, user_id=user_id(app, "bob@example.com"))[-1].id
    page = ann.get("/account").get_data(as_text=True)
    assert page.count('class="activity__item') == 3 and "Sign-in refused" not in page
    # Another user's event as the cursor, or a hostile one: nothing of anyone's.
    for before in (str(bobs_event), "0", "-1", "9" * 30, "１２", "abc"):
        answer = ann.get(f"/account/activity?before={before}", headers=HTMX)
        assert answer.status_code == 200, before
        shown = answer.get_data(as_text=True).count("activity__item")
        assert shown == (0 if before == str(bobs_event) else 3), before


@pytest.mark.parametrize(
    ("language", "heading", "signed_in", "others", "refused"),
    [
        (
            "de",
            "Letzte Aktivitäten",
            "Mit Password angemeldet",
            "2 andere Sitzungen abgemeldet",
            None,
        ),
        (
            "ar",
            "النشاط الأخير",
            "تسجيل الدخول باستخدام Password",
            "سُجّل الخروج من جلستين أخريين",
            "لا شيء آخر.",
        ),
    ],
)
def test_recent_activity_is_in_the_page_s_language_with_the_device_as_kept(
    password_app: Callable[..., Flask],
    language: str,
    heading: str,
    signed_in: str,
    others: str,
    refused: str | None,
) -> None:
    """The card and its page say what happened and when in the reader's language (chosen
    in the footer or by the browser); the device stays as the trail keeps it."""
    from webapp.i18n import format_moment

    app = password_app()
    ann = app.test_client()
    if language == "ar":
        ann.set_cookie("auth.locale", "ar")
    else:
        ann.environ_base["HTTP_ACCEPT_LANGUAGE"] = language
    ann.environ_base["HTTP_USER_AGENT"] = FIREFOX
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with freeze_time(start):
        sign_in(ann, "ann@example.com")
        for _ in range(2):
            sign_in(app.test_client(), "ann@example.com", headers={"User-Agent": FIREFOX})
        csrf_post(ann, "/account/sessions/end-others")
        page = ann.get("/account").get_data(as_text=True)
    card = page[page.index('id="activity"') :]
    assert f'<h2 id="activity-title">{heading}</h2>' in card
    items = _items(card)
    assert items[0].startswith(others) and items[1].startswith(signed_in)
    with app.test_request_context("/", headers={"Accept-Language": language}):
        when = " ".join(format_moment(start).split())  # as _items reads it
    assert all(f"{when} · Firefox on Linux · " in item for item in items)
    assert "Recent activity" not in card and "UTC UTC" not in card
    if refused is not None:  # the page of what comes after the last one: nothing more
        last = events(app, user_id=user_id(app, "ann@example.com"))[0].id
        with freeze_time(start):
            rest = ann.get(f"/account/activity?before={last}").get_data(as_text=True)
        assert '<html lang="ar" dir="rtl">' in rest and refused in rest


def test_the_activity_page_needs_a_session(client: FlaskClient) -> None:
    answer = client.get("/account/activity")
    assert answer.status_code == 302 and "error=SessionRequired" in answer.location


# -- flask auth events ------------------------------------------------------------------


def test_events_command_filters_and_prints(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with freeze_time(start):
        sign_in(app.test_client(), "ann@example.com", headers={"User-Agent": FIREFOX})
    with freeze_time(start + timedelta(hours=2)):
        sign_in(app.test_client(), "ann@example.com", WRONG_PASSWORD)
        sign_in(app.test_client(), "bob@example.com")
    runner = app.test_cli_runner()

    def run(*args: str) -> str:
        with freeze_time(start + timedelta(hours=3)):
            result = runner.invoke(args=["auth", "events", *args])
        assert result.exit_code == 0, result.output
        return result.output

    lines = run().splitlines()
    assert lines[0].split()[:3] == ["time", "type", "outcome"] and len(lines) == 8
    assert "2026-03-01 12:00:00  account.created" in lines[1]
    assert "ann@example.com" in lines[3] and "Firefox on Linux" in lines[3]
    failure = lines[4]
    assert "signin" in failure and "failure CredentialsSignin" in failure
    assert f"#{_hash(app, 'ann@example.com')[:16]} " in failure  # tried as ann: her hash

    ann = run("--user", "Ann@Example.com").splitlines()
    assert len(ann) == 5 and all("bob@" not in line for line in ann)
    assert len(run("--since", "90m").splitlines()) == 5
    assert len(run("--since", "2026-03-01T13:00").splitlines()) == 5
    assert len(run("--type", "signin", "--type", "account.created").splitlines()) == 6
    assert len(run("--limit", "2").splitlines()) == 3
    assert run("--user", "nobody@example.com").strip() == "no events"

    records = [json.loads(line) for line in run("--json", "--user", "bob@example.com").splitlines()]
    assert [r["type"] for r in records] == ["account.created", "account.linked", "signin"]
    assert records[-1]["userEmail"] == "bob@example.com" and records[-1]["outcome"] == "success"
    assert records[-1]["time"] == "2026-03-01T14:00:00.000Z"
    assert set(records[-1]) == {
        "id", "time", "type", "outcome", "error", "userId", "userEmail", "subjectHash",
        "provider", "ip", "device", "requestId", "detail",
    }  # fmt: skip


def test_events_command_refuses_bad_options(app: Flask) -> None:
    runner = app.test_cli_runner()
    for args in (
        ["--since", "last tuesday"],
        ["--type", "nonsense"],
        ["--limit", "-1"],
        ["--user", "not an address"],
    ):
        result = runner.invoke(args=["auth", "events", *args])
        assert result.exit_code == 2, (args, result.output)
