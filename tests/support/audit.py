"""The audit and notice tests' shared parts: an app with a credentials provider whose
users' addresses are verified (``password_app``), signing in through it, and reading the
audit trail. A pytest plugin (tests/conftest.py), so its fixture is everyone's."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp.core.hooks import AuthHooks, UserInfo
from webapp.storage.db import db
from webapp.storage.models import AuthEvent, User

from .oauth import write_providers_toml

PASSWORDS = {
    "ann@example.com": "Ann's-password-" + "p" * 12,
    "bob@example.com": "Bob's-password-" + "q" * 12,
}
WRONG_PASSWORD = "not-her-password-" + "w" * 12
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"
CHROME_MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/156.0.0.0 Safari/537.36"
)
HTMX = {"HX-Request": "true"}


def password_hooks() -> AuthHooks:
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form: dict[str, str]) -> UserInfo | None:
        email = form["email"].strip().lower()
        if PASSWORDS.get(email) != form["password"]:
            return None
        return UserInfo(email=email, name=email.split("@")[0], subject=email, email_verified=True)

    return hooks


PASSWORD_PROVIDER = {
    "id": "password",
    "type": "credentials",
    "name": "Password",
    "fields": [
        {"name": "email", "label": "E-mail", "type": "email"},
        {"name": "password", "label": "Password", "type": "password"},
    ],
}


@pytest.fixture
def password_app(make_app: Callable[..., Flask], tmp_path: Path) -> Callable[..., Flask]:
    """``password_app(providers=[…], **settings)``: the app with a credentials provider
    ("password", PASSWORDS, addresses verified) and any other providers given."""

    def factory(providers: list[dict[str, Any]] | None = None, **overrides: Any) -> Flask:
        path = tmp_path / f"auth-{secrets.token_hex(4)}.toml"
        write_providers_toml(path, [PASSWORD_PROVIDER, *(providers or [])])
        # Notices go to this test's outbox (or EMAIL_SERVER, if given).
        overrides.setdefault("EMAIL_OUTBOX", str(tmp_path / "outbox"))
        return make_app(AUTH_CONFIG=str(path), hooks=password_hooks(), **overrides)

    return factory


def sign_in(client: FlaskClient, email: str, password: str | None = None, **kw: Any) -> Any:
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    form = {"csrfToken": csrf, "email": email, "password": password or PASSWORDS[email]}
    return client.post("/auth/callback/password", data=form, **kw)


def csrf_post(client: FlaskClient, path: str, **form: str) -> Any:
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    return client.post(path, data={"csrfToken": csrf, **form})


def events(app: Flask, **where: Any) -> list[AuthEvent]:
    with app.app_context():
        query = sa.select(AuthEvent).filter_by(**where).order_by(AuthEvent.id)
        found = list(db.session.scalars(query))
        db.session.expunge_all()
        return found


def types(app: Flask, **where: Any) -> list[str]:
    return [e.type for e in events(app, **where)]


def user_id(app: Flask, email: str) -> int:
    with app.app_context():
        return int(db.session.scalar(sa.select(User.id).where(User.email == email)))
