"""Security notices by e-mail (docs/audit.md): a sign-in from a new device, a sign-in method
added or removed, other sessions signed out, the account deleted. Over real SMTP (aiosmtpd
on loopback): each has a text and an HTML part and no link, goes to a verified address
only, after the commit, and a mail server that refuses fails nothing."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time

from webapp.settings import ConfigError, load_settings
from webapp.storage.db import db
from webapp.storage.models import Authenticator, Session, User

from .support.audit import CHROME_MAC, FIREFOX, PASSWORDS, csrf_post, events, sign_in, user_id
from .support.config import TEST_SECRET
from .support.mail import Mailbox, html_of, text_of
from .support.oauth import Browser, FakeIdP, fake_idp
from .support.passkey_ceremonies import Passkeys

ANN = "ann@example.com"
NEW_DEVICE = "New sign-in to your Webapp account"
OTHERS = "Your other Webapp sessions were signed out"
ADDED = "A sign-in method was added to your Webapp account"
REMOVED = "A sign-in method was removed from your Webapp account"
DELETED = "Your Webapp account was deleted"


@pytest.fixture
def notice_app(password_app: Callable[..., Flask], mailbox: Mailbox) -> Callable[..., Flask]:
    """The password app with its mail (and notices) going to ``mailbox``."""

    def factory(providers: list[dict[str, Any]] | None = None, **overrides: Any) -> Flask:
        overrides.setdefault("EMAIL_SERVER", mailbox.url())
        return password_app(providers, **overrides)

    return factory


def browser(app: Flask, agent: str = FIREFOX, ip: str = "203.0.113.10") -> FlaskClient:
    client = app.test_client()
    client.environ_base.update({"HTTP_USER_AGENT": agent, "REMOTE_ADDR": ip})
    return client


def subjects(mailbox: Mailbox) -> list[str]:
    return [str(m["Subject"]) for m in mailbox.messages]


def assert_no_link(message: EmailMessage) -> None:
    for part in (text_of(message), html_of(message)):
        lowered = part.lower()
        for sign in ("http:", "https:", "href", "/callback", "token=", "www."):
            assert sign not in lowered, (sign, part)


# -- a sign-in from a new device ---------------------------------------------------------


def test_a_sign_in_from_a_new_device_is_told(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = notice_app()
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)

    def signs_in(agent: str, ip: str, days: float = 0) -> list[str]:
        mailbox.reset()
        with freeze_time(start + timedelta(days=days)):
            assert sign_in(browser(app, agent, ip), ANN).status_code == 302
        return subjects(mailbox)

    assert signs_in(FIREFOX, "203.0.113.10") == []  # the first sign-in of a new user
    assert signs_in(FIREFOX, "203.0.113.10", days=1) == []  # the same device
    assert signs_in(FIREFOX, "203.0.113.200", days=2) == []  # the same /24
    assert signs_in(CHROME_MAC, "203.0.113.10", days=3) == [NEW_DEVICE]  # another browser
    assert signs_in(FIREFOX, "198.51.100.10", days=4) == [NEW_DEVICE]  # another network
    assert signs_in(FIREFOX, "198.51.100.77", days=5) == []  # seen the day before
    # Seen last on day 2: 90 days later it is still known, after that it is new again.
    assert signs_in(FIREFOX, "203.0.113.10", days=91.9) == []
    assert signs_in(CHROME_MAC, "203.0.113.10", days=93.1) == [NEW_DEVICE]

    message = mailbox.last()
    assert message["To"] == ANN
    text = text_of(message)
    assert "Chrome on Mac OS X" in text and "203.0.113.10" in text and "Password" in text
    # The time as the pages write it, in the language of the sign-in's request (English).
    assert "Jun 2, 2026, 2:24 PM UTC" in text.replace("\u202f", " ")
    assert "Chrome on Mac OS X" in html_of(message)
    assert_no_link(message)


def test_the_trail_keeps_the_device_in_no_one_s_language(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    """A sign-in from a German page stores the same English device label as one from an
    Arabic page, so the new-device check knows the device whatever language it asks in."""
    app = notice_app()
    german = browser(app)
    assert sign_in(german, ANN, headers={"Accept-Language": "de"}).status_code == 302
    arabic = browser(app)
    arabic.set_cookie("auth.locale", "ar")
    assert sign_in(arabic, ANN, headers={"Accept-Language": "de"}).status_code == 302
    assert [e.device for e in events(app, type="signin")] == ["Firefox on Linux"] * 2
    assert subjects(mailbox) == []  # the same device: nothing new
    # The account page, in German, names the device of its sessions in German; the trail not.
    page = german.get("/account", headers={"Accept-Language": "de"}).get_data(as_text=True)
    assert "Firefox 130 unter Linux" in page and "· Firefox on Linux ·" in " ".join(
        re.sub(r"<[^>]+>", " ", page).split()
    )
    # Another device, in Arabic: new, and told.
    other = sign_in(browser(app, CHROME_MAC), ANN, headers={"Accept-Language": "ar"})
    assert other.status_code == 302
    assert [e.device for e in events(app, type="signin")][-1] == "Chrome on Mac OS X"
    assert len(mailbox.messages) == 1


@pytest.mark.parametrize(
    ("language", "subject", "sentence", "direction"),
    [
        (
            "de",
            "Neue Anmeldung in Ihrem Konto bei Webapp",
            "Bei Ihrem Konto hat sich gerade jemand mit Password angemeldet",
            "ltr",
        ),
        (
            "ar",
            "تسجيل دخول جديد إلى حسابك في Webapp",
            "سُجّل الدخول للتو إلى حسابك باستخدام Password",
            "rtl",
        ),
    ],
)
def test_a_notice_is_in_the_language_of_the_request_that_sends_it(
    notice_app: Callable[..., Flask],
    mailbox: Mailbox,
    language: str,
    subject: str,
    sentence: str,
    direction: str,
) -> None:
    """Over real SMTP: the subject, both parts, the labels, the time and the page's button
    named in the advice are the reader's language; the device label and the provider's
    name stay as they are."""
    from webapp.i18n import format_moment

    app = notice_app()
    sign_in(browser(app), ANN)  # in English: the first sign-in tells nothing
    moment = datetime(2026, 3, 4, 9, 30, tzinfo=UTC)
    with freeze_time(moment):
        newcomer = browser(app, CHROME_MAC, "198.51.100.7")
        newcomer.set_cookie("auth.locale", language)  # the footer's choice
        assert sign_in(newcomer, ANN).status_code == 302
        with app.test_request_context("/", headers={"Accept-Language": language}):
            when = format_moment(moment)
            button = app.jinja_env.from_string("{{ _('Sign out all other sessions') }}").render()
    assert subjects(mailbox) == [subject]
    message = mailbox.last()
    text, html = text_of(message), html_of(message)
    assert f'<html lang="{language}" dir="{direction}">' in html
    for part in (" ".join(text.split()), re.sub(r"<[^>]+>", "", html)):
        assert sentence in part
        assert when in part and "Chrome on Mac OS X" in part and "198.51.100.7" in part
        assert f"«{button}»" in part or f"„{button}“" in part
        assert "If this was you" not in part and "Device" not in part
    assert_no_link(message)


def test_a_notice_repeats_no_address_a_client_sent(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    """The device is read from the user agent, which the signer-in writes: a bot's name
    made of an address keeps no dot, slash or colon, so no mail program links it."""
    app = notice_app()
    sign_in(browser(app), ANN)
    agent = "Mozilla/5.0 (compatible; www.evil.example/login https://evil.example spider/2.0)"
    sign_in(browser(app, agent), ANN)
    assert subjects(mailbox) == [NEW_DEVICE]
    text = text_of(mailbox.last())
    [device] = [line for line in text.splitlines() if line.strip().startswith("Device:")]
    assert not set("./:@") & set(device.split(":", 1)[1]), device
    assert_no_link(mailbox.last())


def test_ipv6_counts_by_48(notice_app: Callable[..., Flask], mailbox: Mailbox) -> None:
    app = notice_app()
    sign_in(browser(app, ip="2001:db8:1:2::5"), ANN)
    sign_in(browser(app, ip="2001:db8:1:ffff::9"), ANN)
    assert subjects(mailbox) == []
    sign_in(browser(app, ip="2001:db8:2::5"), ANN)
    assert subjects(mailbox) == [NEW_DEVICE]


def test_no_notice_before_the_trail_knows_a_sign_in(
    notice_app: Callable[..., Flask],
    mailbox: Mailbox,
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
) -> None:
    """A user whose sign-ins predate the trail (or its retention) gets none: nothing to
    compare with."""
    app = notice_app()
    ann = user_factory(app, email=ANN, email_verified=datetime.now(UTC))
    account_factory(app, ann, provider="password", type="credentials", provider_account_id=ANN)
    sign_in(browser(app), ANN)
    assert subjects(mailbox) == []
    sign_in(browser(app, CHROME_MAC), ANN)
    assert subjects(mailbox) == [NEW_DEVICE]


def test_an_unverified_address_is_told_nothing(
    make_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    """The demo sign-in's addresses are unverified: anyone may have typed them."""
    from .support.signin import demo_sign_in

    app = make_app(EMAIL_SERVER=mailbox.url())
    demo_sign_in(browser(app), ANN)
    demo_sign_in(browser(app, CHROME_MAC, "198.51.100.1"), ANN)
    assert subjects(mailbox) == []


def test_a_sign_in_held_for_its_second_factor_is_told_once_it_passes(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    from .support.second_factor import enrol_authenticator, submit_second_factor, totp_code

    app = notice_app()
    first = browser(app)
    sign_in(first, ANN)
    key, _ = enrol_authenticator(first)
    other = browser(app, CHROME_MAC)
    sign_in(other, ANN)
    assert subjects(mailbox) == []  # no session yet
    with freeze_time(datetime.now(UTC) + timedelta(seconds=30)):
        assert submit_second_factor(other, totp_code(key)).status_code == 302
    assert subjects(mailbox) == [NEW_DEVICE]


# -- sign-in methods, other sessions, the account ---------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as idp:
        yield idp


def test_a_method_added_or_removed_is_told(
    notice_app: Callable[..., Flask], mailbox: Mailbox, fake: FakeIdP
) -> None:
    app = notice_app([fake.provider_config()])
    ann = browser(app)
    sign_in(ann, ANN)
    assert "error" not in Browser(ann).sign_in("fake").location
    assert subjects(mailbox) == [ADDED]
    assert "Fake can now be used to sign in" in text_of(mailbox.last())

    passkeys = Passkeys(ann)
    assert passkeys.register(name="Ann's key").status_code == 200
    # A passkey's name is the adder's text: not repeated in a notice.
    assert "A passkey can now be used" in text_of(mailbox.last())
    assert "Ann's key" not in text_of(mailbox.last()) + html_of(mailbox.last())
    with app.app_context():
        passkey = db.session.scalar(sa.select(Authenticator.id))
        account = db.session.scalar(sa.text("SELECT id FROM accounts WHERE provider = 'fake'"))
    csrf_post(ann, f"/account/passkeys/{passkey}/remove")
    assert "A passkey can no longer be used" in text_of(mailbox.last())
    csrf_post(ann, f"/account/accounts/{account}/unlink")
    assert "Fake can no longer be used to sign in" in text_of(mailbox.last())
    assert subjects(mailbox) == [ADDED, ADDED, REMOVED, REMOVED]
    for message in mailbox.messages:
        assert message["To"] == ANN
        assert_no_link(message)


def test_the_first_sign_in_links_without_a_notice(
    notice_app: Callable[..., Flask], mailbox: Mailbox, fake: FakeIdP
) -> None:
    """A new user's first account is the sign-up, not news."""
    app = notice_app([fake.provider_config()])
    assert "error" not in Browser(browser(app)).sign_in("fake").location
    assert row_users(app) == 1 and subjects(mailbox) == []


def row_users(app: Flask) -> int:
    with app.app_context():
        return int(db.session.scalar(sa.select(sa.func.count()).select_from(User)))


def test_signing_out_everywhere_else_is_told(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = notice_app()
    ann = browser(app)
    sign_in(ann, ANN)
    for _ in range(2):
        sign_in(browser(app), ANN)
    received: list[int] = []
    deliver = mailbox.handle_DATA

    async def after_commit(server: Any, session: Any, envelope: Any) -> str:
        # On a connection of the test's own: what is committed when the message arrives.
        with app.app_context(), db.engine.connect() as conn:
            received.append(conn.execute(sa.select(sa.func.count()).select_from(Session)).scalar())
        return await deliver(server, session, envelope)

    mailbox.handle_DATA = after_commit  # type: ignore[method-assign]
    try:
        assert csrf_post(ann, "/account/sessions/end-others").status_code == 303
    finally:
        del mailbox.handle_DATA
    assert subjects(mailbox) == [OTHERS] and received == [1]
    assert "2 other sessions of your account were signed out" in " ".join(
        text_of(mailbox.last()).split()
    )
    assert_no_link(mailbox.last())
    # Nothing left to sign out: nothing to tell.
    csrf_post(ann, "/account/sessions/end-others")
    assert subjects(mailbox) == [OTHERS]


def test_a_refused_action_tells_nothing(notice_app: Callable[..., Flask], mailbox: Mailbox) -> None:
    app = notice_app()
    start = datetime.now(UTC)
    ann = browser(app)
    with freeze_time(start):
        sign_in(ann, ANN)
        sign_in(browser(app), ANN)
    with freeze_time(start + timedelta(hours=1)):  # no recent sign-in
        answer = csrf_post(ann, "/account/sessions/end-others")
        assert "/account/confirm" in answer.location
        csrf_post(ann, "/account/delete", confirm="DELETE")
    assert subjects(mailbox) == []


def test_the_deleted_account_is_told_at_the_address_it_had(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = notice_app()
    ann = browser(app)
    sign_in(ann, ANN)
    assert csrf_post(ann, "/account/delete", confirm="DELETE").status_code == 303
    assert row_users(app) == 0
    assert subjects(mailbox) == [DELETED]
    message = mailbox.last()
    assert message["To"] == ANN and mailbox.envelopes[-1][1] == [ANN]
    assert "everything linked to it" in text_of(message) and ANN in html_of(message)
    assert message.get_content_type() == "multipart/alternative"
    assert_no_link(message)


# -- switches, and a mail server that refuses ---------------------------------------------


@pytest.mark.parametrize(
    ("setting", "silenced"),
    [
        ("AUTH_NOTICE_NEW_DEVICE", NEW_DEVICE),
        ("AUTH_NOTICE_OTHER_SESSIONS", OTHERS),
        ("AUTH_NOTICE_ACCOUNT_DELETED", DELETED),
        ("AUTH_NOTICE_METHODS", ADDED),
    ],
)
def test_each_notice_has_its_switch(
    notice_app: Callable[..., Flask], mailbox: Mailbox, setting: str, silenced: str
) -> None:
    app = notice_app(**{setting: "false"})
    ann = browser(app)
    sign_in(ann, ANN)
    sign_in(browser(app, CHROME_MAC), ANN)  # a new device
    Passkeys(ann).register(name="key")  # a method added
    csrf_post(ann, "/account/sessions/end-others")
    csrf_post(ann, "/account/delete", confirm="DELETE")
    expected = [NEW_DEVICE, ADDED, OTHERS, DELETED]
    assert subjects(mailbox) == [s for s in expected if s != silenced]


@pytest.mark.parametrize("refusal", ["connection refused", "554 at DATA"])
def test_a_notice_that_cannot_be_delivered_fails_nothing(
    notice_app: Callable[..., Flask],
    mailbox: Mailbox,
    refusing_smtp: str,
    caplog: pytest.LogCaptureFixture,
    refusal: str,
) -> None:
    if refusal == "connection refused":
        app = notice_app(EMAIL_SERVER=refusing_smtp)
    else:
        app = notice_app()
        mailbox.data_reply = "554 Message rejected"
    ann = browser(app)
    sign_in(ann, ANN)
    second = browser(app, CHROME_MAC)
    with caplog.at_level(logging.WARNING, logger="webapp.flows.notices"):
        answer = sign_in(second, ANN)  # a new device: its notice fails
        assert answer.status_code == 302 and "error" not in answer.location
        assert second.get("/auth/session").json["user"]["email"] == ANN
        assert csrf_post(ann, "/account/sessions/end-others").status_code == 303
        assert csrf_post(ann, "/account/delete", confirm="DELETE").status_code == 303
    assert row_users(app) == 0 and mailbox.messages == []
    lines = [r.getMessage() for r in caplog.records if r.name == "webapp.flows.notices"]
    assert [line.split(":")[0] for line in lines] == [
        "security notice notice_new_device not delivered",
        "security notice notice_other_sessions not delivered",
        "security notice notice_account_deleted not delivered",
    ]
    assert not any(ANN in line or PASSWORDS[ANN] in line for line in lines)


def test_notices_follow_the_mail_settings() -> None:
    production = {
        "APP_ENV": "production",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "https://example.com/auth",
        "DATABASE_URL": "postgresql://app@db.example/app",
    }
    off = load_settings(production)
    assert not (off.notice_new_device or off.notice_methods or off.notice_other_sessions)
    assert not off.notice_account_deleted
    on = load_settings({**production, "EMAIL_SERVER": "smtp://mail.example.com"})
    assert on.notice_new_device and on.notice_methods and on.notice_other_sessions
    assert on.notice_account_deleted
    assert not load_settings(
        {**production, "EMAIL_SERVER": "smtp://mail.example.com", "AUTH_NOTICE_METHODS": "off"}
    ).notice_methods
    with pytest.raises(ConfigError, match="AUTH_NOTICE_NEW_DEVICE needs EMAIL_SERVER"):
        load_settings({**production, "AUTH_NOTICE_NEW_DEVICE": "true"})
    with pytest.raises(ConfigError, match="AUTH_NOTICE_ACCOUNT_DELETED must be true or false"):
        load_settings({**production, "AUTH_NOTICE_ACCOUNT_DELETED": "sometimes"})
    development = load_settings({"APP_ENV": "development", "AUTH_SECRET": TEST_SECRET})
    assert development.notice_new_device  # the outbox


def test_a_notice_names_this_users_events_only(
    notice_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    """Bob's sign-ins from Ann's devices say nothing about Ann's, and the reverse."""
    app = notice_app()
    sign_in(browser(app), ANN)
    sign_in(browser(app, CHROME_MAC), "bob@example.com")
    sign_in(browser(app, CHROME_MAC), ANN)
    sign_in(browser(app), "bob@example.com")
    assert [(m["To"], m["Subject"]) for m in mailbox.messages] == [
        (ANN, NEW_DEVICE),
        ("bob@example.com", NEW_DEVICE),
    ]
    assert user_id(app, ANN) != user_id(app, "bob@example.com")
