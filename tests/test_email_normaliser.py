"""Every way an address enters the app goes through the one normaliser (auth/addresses.py).

Account linking compares addresses; if one entry point stored ``ANN@example.com`` and
another looked for ``ann@example.com``, the owner would not be found (or two users would
hold one address). Each entry point here is given a messy form of one address, full-width
letters and all, and must store or use exactly ``ann@example.com``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp.core.hooks import AuthHooks, UserInfo
from webapp.storage.db import db
from webapp.storage.models import User

from .support.mail import EmailActions, Mailbox
from .support.oauth import Browser, FakeIdP, fake_idp, write_providers_toml
from .support.signin import demo_sign_in

MESSY = " ＡＮＮ@Example.COM "
CLEAN = "ann@example.com"


def _emails(app: Flask) -> list[str | None]:
    with app.app_context():
        return list(db.session.scalars(sa.select(User.email)))


@pytest.fixture
def idp() -> Iterator[FakeIdP]:
    with fake_idp() as provider:
        provider.userinfo = {"sub": "user-1", "email": MESSY, "email_verified": True}
        yield provider


def test_the_e_mail_form(make_app: Callable[..., Flask], mailbox: Mailbox) -> None:
    app = make_app(EMAIL_SERVER=mailbox.url(), EMAIL_TIMEOUT="5")
    EmailActions(app.test_client()).request_link(MESSY)
    assert mailbox.envelopes[-1][1] == [CLEAN]


def test_an_oauth_profile(make_oauth_app: Callable[..., Flask], idp: FakeIdP) -> None:
    app = make_oauth_app([idp.provider_config()])
    Browser(app.test_client()).sign_in("fake")
    assert _emails(app) == [CLEAN]


def test_a_credentials_hook(make_app: Callable[..., Flask], tmp_path: Any) -> None:
    hooks = AuthHooks()
    hooks.authorize = lambda form: UserInfo(email=MESSY, subject="ann", email_verified=True)
    toml = write_providers_toml(tmp_path / "p.toml", [{"id": "pw", "type": "credentials"}])
    app = make_app(hooks=hooks, AUTH_CONFIG=str(toml))
    client = app.test_client()
    token = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    client.post("/auth/callback/pw", data={"csrfToken": token, "email": "x", "password": "y"})
    assert _emails(app) == [CLEAN]


def test_the_demo_sign_in(app: Flask) -> None:
    demo_sign_in(app.test_client(), MESSY)
    assert _emails(app) == [CLEAN]


def test_the_operator_commands(app: Flask) -> None:
    demo_sign_in(app.test_client(), CLEAN)
    runner = app.test_cli_runner()
    assert CLEAN in runner.invoke(args=["auth", "sessions", "--user", MESSY]).output
    assert "revoked 1 session(s)" in runner.invoke(args=["auth", "revoke", "--user", MESSY]).output
