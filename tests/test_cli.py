"""Operator commands: flask auth cleanup | sessions | revoke."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from freezegun import freeze_time

from webapp.storage.db import db
from webapp.storage.models import (
    DeviceRequest,
    RateLimitCounter,
    Session,
    UsedLogoutToken,
    VerificationToken,
)

from .support.rows import row_count
from .support.signin import demo_sign_in


def test_cleanup_deletes_only_what_expired(app, client, auth, runner):
    with freeze_time("2026-01-01 00:00:00"):
        auth.signin("old@example.com")
        auth.signin("wrong@example.com", password="nope")  # leaves rate counters
    auth.signin("ann@example.com")  # a live session (the old one was replaced in this client)
    other = app.test_client()
    with freeze_time("2026-01-01 00:00:00"):
        demo_sign_in(other, "stale@example.com")
    with app.app_context():
        now = datetime.now(UTC)
        db.session.add_all(
            [
                VerificationToken(
                    identifier="a@example.com",
                    token_hash="1" * 64,
                    expires=now - timedelta(minutes=1),
                ),
                VerificationToken(
                    identifier="b@example.com",
                    token_hash="2" * 64,
                    expires=now + timedelta(hours=1),
                ),
            ]
        )
        db.session.commit()
    assert row_count(app, Session) == 2
    result = runner.invoke(args=["auth", "cleanup", "--batch-size", "1"])
    assert result.exit_code == 0, result.output
    assert "deleted 1 expired session(s)" in result.output
    assert "deleted 1 expired verification token(s)" in result.output
    # Every attempt is counted before the hook runs: the three 2026 attempts left windows
    # per (identifier, address) and per identifier (3 + 3) and one for their address; the
    # refused one's record, one of the audit trail's allowance for that address.
    assert "deleted 8 finished rate-limit window(s)" in result.output
    assert row_count(app, Session) == 1
    assert row_count(app, VerificationToken) == 1
    # The live sign-in's windows (its attempt counted, then given back) are not finished.
    assert row_count(app, RateLimitCounter) == 3


def test_cleanup_deletes_spent_device_requests_and_logout_tokens(app, runner):
    def device(handle: str, expires: datetime) -> DeviceRequest:
        return DeviceRequest(
            handle_hash=handle * 64,
            provider="corp",
            device_code="device-code-" + handle,
            user_code="WDJB-MJHT",
            verification_uri="https://sso.example.com/device",
            interval=5,
            next_poll_at=expires,
            expires=expires,
            created_at=expires - timedelta(minutes=10),
        )

    with app.app_context():
        now = datetime.now(UTC)
        past, future = now - timedelta(seconds=1), now + timedelta(minutes=5)
        db.session.add_all(
            [
                device("a", past),
                device("b", future),
                UsedLogoutToken(provider="corp", jti="spent", expires=past),
                UsedLogoutToken(provider="corp", jti="still-refused", expires=future),
            ]
        )
        db.session.commit()
    result = runner.invoke(args=["auth", "cleanup"])
    assert result.exit_code == 0, result.output
    assert "deleted 1 expired device sign-in(s)" in result.output
    assert "deleted 1 remembered logout token(s)" in result.output
    with app.app_context():
        assert [r.handle_hash for r in db.session.scalars(sa.select(DeviceRequest))] == ["b" * 64]
        assert db.session.scalars(sa.select(UsedLogoutToken.jti)).all() == ["still-refused"]


def test_sessions_lists_and_filters(app, client, auth, runner):
    auth.signin("ann@example.com")
    app.test_client()
    other = app.test_client()
    demo_sign_in(
        other,
        "bob@example.com",
        headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0"},
    )
    result = runner.invoke(args=["auth", "sessions"])
    assert result.exit_code == 0
    assert "ann@example.com" in result.output and "bob@example.com" in result.output
    assert "Firefox/130.0" in result.output
    result = runner.invoke(args=["auth", "sessions", "--user", "BOB@example.com"])
    assert "bob@example.com" in result.output and "ann@example.com" not in result.output
    result = runner.invoke(args=["auth", "sessions", "--user", "nobody@example.com"])
    assert result.output.strip() == "no sessions"


def test_revoke_by_user_and_by_session(app, client, auth, runner):
    auth.signin("ann@example.com")
    with app.app_context():
        session_id = db.session.scalar(sa.select(Session.id))
    result = runner.invoke(args=["auth", "revoke", "--session", str(session_id)])
    assert result.exit_code == 0 and "revoked 1 session(s)" in result.output
    assert client.get("/auth/session").json is None

    auth.signin("ann@example.com")
    result = runner.invoke(args=["auth", "revoke", "--user", "ann@example.com"])
    assert result.exit_code == 0 and "revoked 1 session(s)" in result.output
    assert client.get("/auth/session").json is None


def test_revoke_usage_errors(runner):
    assert runner.invoke(args=["auth", "revoke"]).exit_code == 2
    both = ["auth", "revoke", "--user", "a@b.c", "--session", "1"]
    assert runner.invoke(args=both).exit_code == 2
    result = runner.invoke(args=["auth", "revoke", "--user", "nobody@example.com"])
    assert result.exit_code == 1 and "no user with e-mail" in result.output
    result = runner.invoke(args=["auth", "revoke", "--session", "999999"])
    assert result.exit_code == 1 and "no session with id 999999" in result.output


def test_revoke_by_address_ends_every_user_showing_it(
    app, client, auth, runner, user_factory, session_factory
):
    # The demo sign-in claims ann@ unverified; another user owns the address verified.
    auth.signin("ann@example.com")
    owner = user_factory(app, email="ann@example.com", email_verified=datetime.now(UTC))
    session_factory(app, owner, expires=datetime.now(UTC) + timedelta(days=1))
    result = runner.invoke(args=["auth", "revoke", "--user", "ANN@example.com"])
    assert result.exit_code == 0 and "revoked 2 session(s) of 2 user(s)" in result.output
    assert row_count(app, Session) == 0
