"""The view decorators an application puts on its own views: ``recent_signin_required``
and Flask-Login's ``fresh_login_required``, both meaning a sign-in (or a later
confirmation) within AUTH_REAUTH_MAX_AGE, 10 minutes here, or the view's own ``max_age``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient
from flask_login import fresh_login_required
from freezegun import freeze_time

from webapp.auth.decorators import recent_signin_required
from webapp.core.clock import utcnow

from .support.signin import demo_sign_in

LATER = timedelta(hours=3)
SIGNIN = "http://localhost/auth/signin?error=SessionRequired&callbackUrl="


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    app = make_app()

    @app.get("/settings/danger")
    @recent_signin_required
    def danger() -> str:
        return "danger zone"

    @app.get("/settings/minute")
    @recent_signin_required(max_age=60)
    def minute() -> str:
        return "within the minute"

    @app.get("/settings/half-hour")
    @recent_signin_required(max_age=timedelta(minutes=30))
    def half_hour() -> str:
        return "within the half hour"

    @app.get("/settings/fresh")
    @fresh_login_required
    def fresh() -> str:
        return "fresh"

    return app


def test_a_fresh_session_passes(client: FlaskClient) -> None:
    demo_sign_in(client)
    answer = client.get("/settings/danger?tab=keys")
    assert answer.status_code == 200 and answer.get_data(as_text=True) == "danger zone"


def test_an_old_session_is_sent_to_confirm_and_brought_back(client: FlaskClient) -> None:
    start = utcnow()
    with freeze_time(start):
        demo_sign_in(client)
    with freeze_time(start + LATER):
        answer = client.get("/settings/danger?tab=keys")
        assert answer.status_code == 302
        assert answer.headers["Location"] == (
            "http://localhost/account/confirm?next=%2Fsettings%2Fdanger%3Ftab%3Dkeys"
        )
        # Confirming is a sign-in with a method the person has, back to where they were.
        back = demo_sign_in(client, callbackUrl="/settings/danger?tab=keys")
        assert back.headers["Location"] == "http://localhost/settings/danger?tab=keys"
        assert client.get("/settings/danger?tab=keys").get_data(as_text=True) == "danger zone"


def test_the_window_ends_at_auth_reauth_max_age(client: FlaskClient) -> None:
    start = utcnow()
    with freeze_time(start) as frozen:
        demo_sign_in(client)
        frozen.tick(timedelta(minutes=10))
        assert client.get("/settings/danger").status_code == 200
        frozen.tick(timedelta(seconds=1))
        assert client.get("/settings/danger").status_code == 302


def test_signed_out_goes_to_sign_in_as_login_required(client: FlaskClient) -> None:
    answer = client.get("/settings/danger?tab=keys")
    assert answer.status_code == 302
    assert answer.headers["Location"] == (
        SIGNIN + "http%3A%2F%2Flocalhost%2Fsettings%2Fdanger%3Ftab%3Dkeys"
    )


def test_a_json_caller_is_refused_with_the_confirmation_page(client: FlaskClient) -> None:
    start = utcnow()
    with freeze_time(start):
        demo_sign_in(client)
    with freeze_time(start + LATER):
        answer = client.get("/settings/danger", headers={"Accept": "application/json"})
        assert answer.status_code == 403
        assert answer.json == {
            "error": "RecentSignInRequired",
            "message": "For your safety, this needs a recent sign-in.",
            "confirmUrl": "http://localhost/account/confirm?next=%2Fsettings%2Fdanger",
        }


def test_max_age_overrides_the_window_per_view(client: FlaskClient) -> None:
    start = utcnow()
    with freeze_time(start) as frozen:
        demo_sign_in(client)
        frozen.tick(timedelta(minutes=2))
        assert client.get("/settings/danger").status_code == 200
        assert client.get("/settings/minute").headers["Location"] == (
            "http://localhost/account/confirm?next=%2Fsettings%2Fminute"
        )
        frozen.tick(timedelta(minutes=18))
        assert client.get("/settings/danger").status_code == 302
        assert client.get("/settings/half-hour").status_code == 200


def test_a_window_of_nothing_is_refused_when_the_view_is_declared() -> None:
    with pytest.raises(ValueError, match="max_age must be more than zero"):
        recent_signin_required(max_age=0)


def test_fresh_login_required_means_a_recent_sign_in(client: FlaskClient) -> None:
    assert client.get("/settings/fresh").headers["Location"] == (
        SIGNIN + "http%3A%2F%2Flocalhost%2Fsettings%2Ffresh"
    )
    start = utcnow()
    with freeze_time(start):
        demo_sign_in(client)
        answer = client.get("/settings/fresh")
        assert answer.status_code == 200 and answer.get_data(as_text=True) == "fresh"
        # Worked out from the database session: nothing is written to the browser.
        assert "Set-Cookie" not in answer.headers
    with freeze_time(start + LATER):
        assert client.get("/settings/fresh").headers["Location"] == (
            "http://localhost/account/confirm?next=%2Fsettings%2Ffresh"
        )
        demo_sign_in(client, callbackUrl="/settings/fresh")
        assert client.get("/settings/fresh").get_data(as_text=True) == "fresh"
