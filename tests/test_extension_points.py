"""What an embedding application plugs in beside the hooks: the ``audit_event`` signal, told
of every row of the audit trail once it is committed and never of one rolled back, and its
own mail transport (``AuthHooks.mail_transport``) in place of SMTP or the outbox, which,
set at start-up, also stands in for EMAIL_SERVER."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp.audit import trail
from webapp.audit.trail import Event
from webapp.core.hooks import AuthHooks, audit_event, current_hooks
from webapp.settings import ConfigError, current_settings
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import AuthEvent, VerificationToken

from .support.audit import PASSWORDS, csrf_post, sign_in, user_id
from .support.every_event import drive_every_event
from .support.mail import SMTP_PASSWORD, SMTP_USER, EmailActions, Mailbox, code_of, link_of
from .support.oauth import write_providers_toml
from .support.rows import row_count
from .support.signin import demo_sign_in

#: The keyword arguments of ``audit_event``: the columns of the row it tells of.
COLUMNS = (
    "occurred_at",
    "outcome",
    "error_code",
    "user_id",
    "subject_hash",
    "provider",
    "ip",
    "device",
    "request_id",
    "detail",
)
OTHERS_SIGNED_OUT = "Your other Webapp sessions were signed out"
SIGN_IN = "Sign in to Webapp"
NOTICES = ("new_device", "methods", "other_sessions", "account_deleted")
MAGIC_PROVIDER = {"id": "magic", "type": "email", "name": "Magic link"}


# -- audit_event ---------------------------------------------------------------------------


@contextmanager
def hearing_audit_events() -> Iterator[list[tuple[str, dict[str, Any], list[int]]]]:
    """Listen to ``audit_event`` meanwhile: each as heard (its type and fields), with the
    ids of the rows holding exactly those fields that were committed when it was sent (read
    on a connection of its own)."""
    heard: list[tuple[str, dict[str, Any], list[int]]] = []

    def on_audit_event(event_type: str, **fields: Any) -> None:
        assert set(fields) == set(COLUMNS)
        columns = [getattr(AuthEvent, name) for name in COLUMNS]
        query = sa.select(AuthEvent.id, *columns).where(
            AuthEvent.type == event_type, AuthEvent.occurred_at == fields["occurred_at"]
        )
        with db.engine.connect() as conn:
            stored = conn.execute(query).all()
        told = tuple(fields[name] for name in COLUMNS)
        heard.append((event_type, fields, [row.id for row in stored if tuple(row[1:]) == told]))

    with audit_event.connected_to(on_audit_event):
        yield heard


def stored_ids(app: Flask) -> list[int]:
    with app.app_context():
        return sorted(db.session.scalars(sa.select(AuthEvent.id)))


def told_rows(heard: list[tuple[str, dict[str, Any], list[int]]]) -> list[int]:
    """The row each signal told of: one committed with its fields, not told of before."""
    told: list[int] = []
    for event_type, fields, ids in heard:
        untold = [row_id for row_id in ids if row_id not in told]
        assert untold, f"{event_type} {fields}: no committed row, or one told of twice"
        told.append(min(untold))
    return sorted(told)


def test_every_event_type_reaches_a_listener_once_with_its_row(
    password_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    with hearing_audit_events() as heard:
        app, found = drive_every_event(password_app, mailbox)

    assert {event_type for event_type, _, _ in heard} == set(Event)
    assert told_rows(heard) == stored_ids(app)
    # As the table holds no secret, nor does what a listener is told.
    told = repr(
        [
            {k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()}
            for _, fields, _ in heard
        ]
    )
    assert found.leaked(told) == set()


@pytest.mark.parametrize(
    ("verdict", "told"),
    [(False, [("signin", "failure", "AccessDenied")]), ("http://localhost/elsewhere", [])],
    ids=["denied", "sent-elsewhere"],
)
def test_a_sign_in_the_hook_refuses_tells_of_no_success(
    make_app: Callable[..., Flask], verdict: bool | str, told: list[tuple[str, str, str]]
) -> None:
    # The new user's account.created, its sign-in: rolled back with the refusal.
    app = make_app(hooks=AuthHooks(signin=lambda **_: verdict))
    with hearing_audit_events() as heard:
        assert demo_sign_in(app.test_client()).status_code == 302
    assert [(t, f["outcome"], f["error_code"]) for t, f, _ in heard] == told
    assert told_rows(heard) == stored_ids(app)


def test_rows_rolled_back_are_not_told_of(password_app: Callable[..., Flask]) -> None:
    app = password_app()
    sign_in(app.test_client(), "ann@example.com")
    ann = user_id(app, "ann@example.com")
    before = stored_ids(app)
    with hearing_audit_events() as heard, app.test_request_context():
        # A savepoint rolled back (as a first sign-in lost to a race is) inside a
        # transaction that is committed, then a transaction discarded as a whole.
        with suppress(LookupError), db.session.begin_nested():
            trail.record(Event.PASSKEY_ADDED, user_id=ann)
            raise LookupError("the savepoint's work failed")
        trail.record(Event.PASSKEY_REMOVED, user_id=ann)
        transactions.commit()
        trail.record(Event.SECOND_FACTOR_ON, user_id=ann)
        transactions.discard()
    assert [(t, f["user_id"]) for t, f, _ in heard] == [("passkey.removed", ann)]
    assert sorted(before + told_rows(heard)) == stored_ids(app)


def test_a_listener_that_raises_fails_the_request_not_the_commit(
    password_app: Callable[..., Flask],
) -> None:
    # As for signed_in: the sign-in is stored, the request fails (a test client is given
    # the error; a server answers 500).
    app = password_app()

    def broken(_event_type: str, **_: Any) -> None:
        raise RuntimeError("the application's listener is broken")

    with (
        audit_event.connected_to(broken, sender=Event.SIGNIN.value),
        pytest.raises(RuntimeError, match="listener is broken"),
    ):
        sign_in(app.test_client(), "ann@example.com")
    with app.app_context():
        types = db.session.scalars(sa.select(AuthEvent.type).order_by(AuthEvent.id)).all()
    assert types == ["account.created", "account.linked", "signin"]


# -- the application's mail transport ------------------------------------------------------


@contextmanager
def own_transport(app: Flask, fails: bool = False) -> Iterator[list[EmailMessage]]:
    """Register a mail transport on ``app``'s hooks after ``create_app`` (as an application
    may, at set-up time); yield the messages it was handed. ``fails``: it raises instead."""
    handed: list[EmailMessage] = []

    def deliver(message: EmailMessage) -> None:
        if fails:
            raise ConnectionError("the mail API answered 503")
        handed.append(message)

    with app.app_context():
        hooks = current_hooks()
        hooks.mail_transport(deliver)
    try:
        yield handed
    finally:
        hooks.send_mail = None


def test_the_applications_transport_delivers_the_sign_in_mail(
    email_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = email_app()
    link_taker, code_taker = EmailActions(app.test_client()), EmailActions(app.test_client())
    with own_transport(app) as handed:
        link_taker.request_link("Ann@Example.com")
        code_taker.request_link("bob@example.com")
    assert mailbox.messages == []  # not SMTP: the application's transport alone
    assert [(m["To"], m["From"]) for m in handed] == [
        ("ann@example.com", "no-reply@localhost"),
        ("bob@example.com", "no-reply@localhost"),
    ]
    assert link_taker.confirm(link_of(handed[0])).status_code == 302
    assert link_taker.session_email() == "ann@example.com"
    assert code_taker.enter_code(code_of(handed[1])).status_code == 302
    assert code_taker.session_email() == "bob@example.com"


def test_the_applications_transport_delivers_security_notices(
    password_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = password_app(EMAIL_SERVER=mailbox.url())
    ann, elsewhere = app.test_client(), app.test_client()
    with own_transport(app) as handed:
        sign_in(ann, "ann@example.com")
        sign_in(elsewhere, "ann@example.com")
        assert csrf_post(ann, "/account/sessions/end-others").status_code == 303
    assert [(m["To"], m["Subject"]) for m in handed] == [("ann@example.com", OTHERS_SIGNED_OUT)]
    assert mailbox.messages == []


def test_a_transport_that_raises_is_answered_and_logged_as_an_smtp_refusal(
    email_app: Callable[..., Flask], mailbox: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    def refused_sign_in(app: Flask) -> tuple[int, str | None, bool, int, str]:
        client = app.test_client()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="webapp.web.error_answers"):
            answer = EmailActions(client).request_link("ann@example.com", callbackUrl="/account")
        [line] = [r.getMessage() for r in caplog.records if r.name == "webapp.web.error_answers"]
        bound = client.get_cookie("auth.email-browser", path="/auth") is not None
        return (
            answer.status_code,
            answer.headers["Location"],
            bound,
            row_count(app, VerificationToken),
            line,
        )

    mailbox.data_reply = "554 Message rejected as spam"
    *by_smtp, smtp_line = refused_sign_in(email_app())
    mailbox.reset()
    app = email_app()
    with own_transport(app, fails=True):
        *by_application, line = refused_sign_in(app)

    assert (
        by_application
        == by_smtp
        == [
            302,
            "http://localhost/auth/error?error=EmailSignin&callbackUrl=%2Faccount",
            False,
            0,
        ]
    )
    assert smtp_line.startswith("auth error EmailSignin: delivery failed: sending via ")
    assert line == (
        "auth error EmailSignin: delivery failed: "
        "the application's mail transport: ConnectionError('the mail API answered 503')"
    )
    assert mailbox.messages == []


def test_a_notice_the_transport_cannot_deliver_is_logged_as_an_smtp_refusal(
    password_app: Callable[..., Flask], mailbox: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    app = password_app(EMAIL_SERVER=mailbox.url())
    ann, elsewhere = app.test_client(), app.test_client()
    sign_in(ann, "ann@example.com")
    sign_in(elsewhere, "ann@example.com")
    with (
        own_transport(app, fails=True),
        caplog.at_level(logging.WARNING, logger="webapp.flows.notices"),
    ):
        assert csrf_post(ann, "/account/sessions/end-others").status_code == 303
    lines = [r.getMessage() for r in caplog.records if r.name == "webapp.flows.notices"]
    assert lines == [
        "security notice notice_other_sessions not delivered: "
        "the application's mail transport: ConnectionError('the mail API answered 503')"
    ]
    assert not any(PASSWORDS["ann@example.com"] in line for line in lines)


# -- the application's transport in place of EMAIL_SERVER ----------------------------------


def transport_hooks() -> tuple[AuthHooks, list[EmailMessage]]:
    """Hooks with a mail transport set before ``create_app``, and the messages it is handed."""
    hooks, handed = AuthHooks(), list[EmailMessage]()
    hooks.mail_transport(handed.append)
    return hooks, handed


def notices_on(app: Flask) -> list[bool]:
    with app.app_context():
        conf = current_settings()
        return [getattr(conf, f"notice_{name}") for name in NOTICES]


def delivery_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "webapp.mail.delivery" and r.getMessage().startswith("mail: ")
    ]


def test_a_transport_set_at_start_up_stands_in_for_email_server_in_production(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    hooks, handed = transport_hooks()
    with caplog.at_level(logging.INFO, logger="webapp.mail.delivery"):
        app = make_app(APP_ENV="production", hooks=hooks)
    assert delivery_lines(caplog) == ["mail: the application's transport"]
    assert list(app.test_client().get("/auth/providers").json) == ["email"]
    assert notices_on(app) == [True, True, True, True]

    by_link, by_code = EmailActions(app.test_client()), EmailActions(app.test_client())
    by_link.request_link("ann@example.com")
    assert by_link.confirm(link_of(handed[-1])).status_code == 302
    assert by_link.session_email() == "ann@example.com"
    by_code.request_link("ann@example.com")
    assert by_code.enter_code(code_of(handed[-1])).status_code == 302
    assert by_code.session_email() == "ann@example.com"
    assert csrf_post(by_link.client, "/account/sessions/end-others").status_code == 303
    assert [(m["To"], m["Subject"]) for m in handed] == [
        ("ann@example.com", SIGN_IN),
        ("ann@example.com", SIGN_IN),
        ("ann@example.com", OTHERS_SIGNED_OUT),
    ]
    assert by_code.session_email() is None


def test_without_a_transport_production_without_email_server_mails_nothing(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    # A provider, as production needs a way to sign in (nothing asks it anything here).
    corp = {"id": "corp", "type": "oidc", "issuer": "https://idp.example", "client_id": "c",
            "client_secret": "s" * 32}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="webapp.mail.delivery"):
        app = make_app(APP_ENV="production", AUTH_PROVIDERS=[corp])
    assert delivery_lines(caplog) == [
        "mail: none (no EMAIL_SERVER): e-mail sign-in and security notices are off"
    ]
    assert notices_on(app) == [False, False, False, False]
    # A transport registered after start-up turns on nothing start-up left off.
    with own_transport(app) as handed:
        assert "email" not in app.test_client().get("/auth/providers").json
        refused = EmailActions(app.test_client()).request_link("ann@example.com")
    assert refused.headers["Location"] == "http://localhost/auth/signin?error=Signin"
    assert handed == []
    with pytest.raises(ConfigError, match="AUTH_NOTICE_METHODS needs EMAIL_SERVER"):
        make_app(APP_ENV="production", AUTH_NOTICE_METHODS="true")


def test_a_declared_email_provider_starts_on_the_applications_transport_alone(
    make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    config = tmp_path / "auth.toml"
    write_providers_toml(config, [MAGIC_PROVIDER])
    hooks, handed = transport_hooks()
    app = make_app(APP_ENV="production", AUTH_CONFIG=str(config), hooks=hooks)
    assert list(app.test_client().get("/auth/providers").json) == ["magic"]
    magic = EmailActions(app.test_client(), provider="magic")
    magic.request_link("ann@example.com")
    assert "/auth/callback/magic?token=" in link_of(handed[-1])
    assert magic.confirm(link_of(handed[-1])).status_code == 302
    assert magic.session_email() == "ann@example.com"

    with pytest.raises(
        ConfigError,
        match="^provider 'magic': EMAIL_SERVER is required for e-mail sign-in outside development",
    ):
        make_app(APP_ENV="production", AUTH_CONFIG=str(config))


def test_with_email_server_too_the_transport_wins_and_email_server_is_still_checked(
    make_app: Callable[..., Flask], mailbox: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    hooks, handed = transport_hooks()
    with caplog.at_level(logging.INFO, logger="webapp.mail.delivery"):
        app = make_app(APP_ENV="production", EMAIL_SERVER=mailbox.url(login=True), hooks=hooks)
    assert delivery_lines(caplog) == [
        "mail: the application's transport (EMAIL_SERVER is set, and unused)"
    ]
    EmailActions(app.test_client()).request_link("ann@example.com")
    assert [m["To"] for m in handed] == ["ann@example.com"]
    assert mailbox.messages == []
    with pytest.raises(ConfigError, match="^EMAIL_SERVER must start with smtp://"):
        make_app(APP_ENV="production", EMAIL_SERVER="https://mail.example.com", hooks=hooks)


def test_the_start_up_log_names_the_smtp_server_and_no_secret(
    make_app: Callable[..., Flask], mailbox: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="webapp.mail.delivery"):
        make_app(APP_ENV="production", EMAIL_SERVER=mailbox.url("smtps", login=True))
    assert delivery_lines(caplog) == [f"mail: SMTP 127.0.0.1:{mailbox.port} (implicit TLS)"]
    assert SMTP_PASSWORD not in caplog.text and SMTP_USER not in caplog.text


def test_a_transport_removed_after_standing_in_fails_the_delivery_plainly(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    hooks, handed = transport_hooks()
    app = make_app(APP_ENV="production", hooks=hooks)
    hooks.send_mail = None
    with caplog.at_level(logging.WARNING, logger="webapp.web.error_answers"):
        answer = EmailActions(app.test_client()).request_link("ann@example.com")
    assert answer.headers["Location"] == "http://localhost/auth/error?error=EmailSignin"
    assert [r.getMessage() for r in caplog.records if r.name == "webapp.web.error_answers"] == [
        "auth error EmailSignin: delivery failed: no mail transport: the application's was "
        "removed after start-up, and EMAIL_SERVER is not set"
    ]
    assert handed == []
