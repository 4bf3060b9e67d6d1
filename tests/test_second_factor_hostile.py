"""Hostile input on the routes and fields of passkeys and two-step verification: no value
of the corpus answers 5xx or writes anything (no session, no factor, no spent code)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp.storage.db import db
from webapp.storage.models import Authenticator, RecoveryCode, Session, TotpAuthenticator

from .support.second_factor import enrol_authenticator
from .support.signin import AuthActions

#: Over-long, NUL, CR/LF, bidi controls, bad UTF-8 (as the bytes' percent-encoding),
#: huge numbers, JSON nesting, markup.
CORPUS = [
    "",
    "x" * 20000,
    "12\x0034",
    "123456\r\nX-Injected: 1",
    "\u202e654321",
    "%ff%fe%00",
    "9" * 400,
    "[" * 5000,
    '{"id": ' * 2000,
    "<script>alert(1)</script>",
    "１２３４５６",  # full-width digits: not the app's code
]


def _state(app: Flask) -> tuple[Any, ...]:
    with app.app_context():
        return (
            db.session.execute(sa.select(sa.func.count()).select_from(Session)).scalar_one(),
            db.session.execute(sa.select(sa.func.count()).select_from(Authenticator)).scalar_one(),
            db.session.execute(
                sa.select(sa.func.count())
                .select_from(RecoveryCode)
                .where(RecoveryCode.used_at.is_(None))
            ).scalar_one(),
            db.session.execute(sa.select(TotpAuthenticator.last_used_step)).scalars().all(),
        )


@pytest.fixture
def held(app: Flask, client: FlaskClient, auth: AuthActions) -> FlaskClient:
    """A user with two-step verification on, and a second browser whose sign-in waits for
    its second factor."""
    auth.signin()
    enrol_authenticator(client)
    other = app.test_client()
    other_auth = AuthActions(other)
    r = other_auth.signin()
    assert r.headers["Location"].endswith("/auth/second-factor")
    return other


@pytest.mark.parametrize("value", CORPUS, ids=range(len(CORPUS)))
def test_second_factor_fields_survive_hostile_values(
    app: Flask, client: FlaskClient, held: FlaskClient, value: str
) -> None:
    before = _state(app)
    csrf = held.get("/auth/csrf").json["csrfToken"]
    # The field as a string and twice (array-shaped), on the gate page.
    for data in ({"code": value}, {"code": [value, value]}):
        r = held.post("/auth/second-factor", data={"csrfToken": csrf, **data})
        assert r.status_code in (302, 400), r.status_code
    csrf = client.get("/auth/csrf").json["csrfToken"]
    r = client.post("/account/confirm", data={"csrfToken": csrf, "code": value, "next": value})
    assert r.status_code in (303, 400, 429)
    r = client.post("/account/two-factor", data={"csrfToken": csrf, "code": value})
    assert r.status_code < 500
    for action in ("authenticate", "register", value):
        r = client.post(
            "/auth/callback/passkey",
            data={"csrfToken": csrf, "action": action, "data": value, "name": value},
        )
        assert r.status_code < 500
    r = client.get("/auth/webauthn-options/passkey", query_string={"action": value})
    assert r.status_code < 500
    assert _state(app) == before


def test_forged_host_headers_reach_no_new_route(app: Flask, client: FlaskClient) -> None:
    """A forged Host is refused before any new route runs; forwarded host headers never
    make the passkey options name another site (the RP ID and origin come from AUTH_URL)."""
    before = _state(app)
    for path in ("/auth/second-factor", "/auth/webauthn-options/passkey?action=authenticate"):
        r = client.get(path, headers={"Host": "evil.example"})
        assert r.status_code == 400
        assert "evil.example" not in r.headers.get("Location", "")
    r = client.get(
        "/auth/webauthn-options/passkey?action=authenticate",
        headers={"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"},
    )
    assert r.status_code == 200
    assert r.json["options"]["rpId"] == "localhost"
    assert "evil" not in r.get_data(as_text=True)
    assert _state(app) == before
