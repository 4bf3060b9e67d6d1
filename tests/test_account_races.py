"""Removing sign-in methods at the same moment: the user always keeps one way in.

A user with exactly two ways in (no e-mail sign-in: the demo address is unverified, and
e-mail sign-in is not offered) asks for both to be removed at once, from two browsers that
share her session: each removal runs in a thread of its own, with its own test client,
over HTTP, on SQLite and on PostgreSQL. Every pair the account area offers is raced:
unlinking a provider and removing a passkey, two passkeys, two providers. Each check of
"not the last method" must see the other removal, so exactly one goes through and the
other is refused with ``LastSignInMethod``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp.storage.db import db
from webapp.storage.models import Account, Authenticator, User

from .support.rows import add_passkey
from .support.signin import demo_sign_in

ROUNDS = 8
SESSION_COOKIE = "auth.session-token"
REMOVED = "removed"
LAST_METHOD = "LastSignInMethod"


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    app = make_app(DB_POOL_SIZE="10")
    # E-mail sign-in would be a way in that no removal touches.
    app.extensions["webapp.providers"].pop("email")
    return app


@dataclass(frozen=True)
class Removal:
    """One removal in the account area: its route, and how its answer tells the outcome."""

    kind: str
    row_id: int

    def send(self, client: FlaskClient) -> str:
        """Send it as the account area does; return ``REMOVED`` or the refusal's code."""
        token = str(client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]
        if self.kind == "provider":
            answer = client.post(
                f"/account/api/accounts/{self.row_id}/unlink", headers={"X-CSRFToken": token}
            )
            body = answer.json
            assert body is not None, answer.status_code
            if answer.status_code == 200:
                assert body == {"unlinked": self.row_id}
                return REMOVED
            assert answer.status_code == 409, (answer.status_code, body)
            return str(body["error"])
        # Passkeys are removed on the account page (htmx swaps its section), which shows
        # the refusal's message in place.
        answer = client.post(
            f"/account/passkeys/{self.row_id}/remove",
            data={"csrfToken": token},
            headers={"HX-Request": "true"},
        )
        page = answer.get_data(as_text=True)
        assert answer.status_code == 200, answer.status_code
        if "was removed; it no longer signs you in." in page:
            return REMOVED
        assert "is your only way to sign in, so it cannot be removed." in page, page
        return LAST_METHOD


def ways_in(app: Flask, user_id: int) -> int:
    """The user's linked providers and passkeys (e-mail sign-in is not offered here)."""
    with app.app_context():
        accounts = db.session.scalar(
            sa.select(sa.func.count()).select_from(Account).where(Account.user_id == user_id)
        )
        passkeys = db.session.scalar(
            sa.select(sa.func.count())
            .select_from(Authenticator)
            .where(Authenticator.user_id == user_id)
        )
        return int(accounts or 0) + int(passkeys or 0)


def signed_in_user(app: Flask, n: int) -> tuple[int, str]:
    """A new user signed in with the demo credentials (her one linked provider, ``demo``);
    return her id and session cookie."""
    client = app.test_client()
    email = f"racer-{n}@example.com"
    assert demo_sign_in(client, email).status_code == 302
    cookie = client.get_cookie(SESSION_COOKIE)
    assert cookie is not None
    with app.app_context():
        user_id = db.session.scalars(sa.select(User.id).where(User.email == email)).one()
    return int(user_id), cookie.value


def demo_account(app: Flask, user_id: int) -> int:
    with app.app_context():
        return int(
            db.session.scalars(sa.select(Account.id).where(Account.user_id == user_id)).one()
        )


def two_ways_in(
    app: Flask, account_factory: Callable[..., int], pair: str, user_id: int
) -> list[Removal]:
    """Give the user exactly two ways in for ``pair``; return the removal of each."""
    demo = demo_account(app, user_id)
    if pair == "provider-passkey":
        return [Removal("provider", demo), Removal("passkey", add_passkey(app, user_id, "Phone"))]
    if pair == "provider-provider":
        return [Removal("provider", demo), Removal("provider", account_factory(app, user_id))]
    with app.app_context():
        db.session.execute(sa.delete(Account).where(Account.id == demo))
        db.session.commit()
    return [
        Removal("passkey", add_passkey(app, user_id, "Phone")),
        Removal("passkey", add_passkey(app, user_id, "Laptop")),
    ]


def race(clients: list[FlaskClient], removals: list[Removal]) -> list[str]:
    """Send each removal from its own browser at the same moment; return the outcomes."""
    start = threading.Barrier(len(removals))
    outcomes: list[Any] = [None] * len(removals)

    def run(n: int) -> None:
        start.wait()
        outcomes[n] = removals[n].send(clients[n])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(removals))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.parametrize("pair", ["provider-passkey", "passkey-passkey", "provider-provider"])
def test_two_removals_at_once_leave_a_way_in(
    app: Flask, account_factory: Callable[..., int], pair: str
) -> None:
    emptied = 0
    outcomes = []
    for n in range(ROUNDS):
        user_id, cookie = signed_in_user(app, n)
        removals = two_ways_in(app, account_factory, pair, user_id)
        assert ways_in(app, user_id) == 2
        clients = [app.test_client() for _ in removals]
        for client in clients:
            client.set_cookie(SESSION_COOKIE, cookie)
        outcomes.append(sorted(race(clients, removals), key=str))
        emptied += ways_in(app, user_id) == 0
    assert emptied == 0, f"{emptied} of {ROUNDS} races left the user no way to sign in"
    assert outcomes == [[LAST_METHOD, REMOVED]] * ROUNDS
