"""A user's tokens at the provider: handed out, refreshed once when due, revoked.

Against the real oidc-provider on loopback (tests/op/server.mjs), which rotates refresh
tokens, answers introspection (so a test can ask whether a token still works) and counts
the grants it gave (so a test can tell how many refreshes really reached it). Its grant
counters live as long as the test session: tests compare before and after.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time
from sqlalchemy import select

from webapp.core.hooks import revocation_failed
from webapp.storage.db import db
from webapp.storage.models import Account

from .support.oauth import CLIENT_METHODS, Browser, NodeOP, error_of, write_providers_toml
from .support.servers import free_port, run_server

pytestmark = pytest.mark.e2e

COOKIE = "auth.session-token"
TOKEN_KEYS = {"accessToken", "expiresAt", "scope", "tokenType"}


@dataclass
class SignedIn:
    app: Flask
    browser: Browser
    user_id: int

    @property
    def client(self) -> FlaskClient:
        return self.browser.client

    def account(self, provider: str = "op-basic") -> Account:
        with self.app.app_context():
            account = db.session.execute(
                select(Account).where(Account.user_id == self.user_id, Account.provider == provider)
            ).scalar_one()
            db.session.expunge(account)
            return account

    def expire_in(self, seconds: float, provider: str = "op-basic") -> None:
        """Make the stored access token expire ``seconds`` from now (due within the margin)."""
        with self.app.app_context():
            account = db.session.execute(
                select(Account).where(Account.user_id == self.user_id, Account.provider == provider)
            ).scalar_one()
            account.expires_at = datetime.now(UTC) + timedelta(seconds=seconds)
            db.session.commit()

    def token(self, provider: str = "op-basic") -> Any:
        return self.client.get(f"/auth/token/{provider}")


def sign_in(app: Flask, provider: str = "op-basic", *, browser: Browser | None = None) -> SignedIn:
    browser = browser or Browser(app.test_client())
    assert error_of(browser.sign_in(provider, login_hint="alice")) is None
    with app.app_context():
        [user_id] = db.session.scalars(select(Account.user_id).where(Account.provider == provider))
    return SignedIn(app, browser, user_id)


def refreshes(node_op: NodeOP, client_id: str = "op-basic") -> int:
    return node_op.grant_count(client_id, "refresh_token")


@pytest.fixture
def alice(node_op: NodeOP, make_oauth_app: Any) -> SignedIn:
    return sign_in(make_oauth_app([node_op.provider_config("op-basic")]))


# -- handed out -------------------------------------------------------------------------


def test_stored_token_is_handed_out_without_a_refresh(node_op: NodeOP, alice: SignedIn) -> None:
    before = refreshes(node_op)
    answer = alice.token()
    assert answer.status_code == 200
    body = answer.json
    assert set(body) == TOKEN_KEYS
    assert body["accessToken"] == alice.account().access_token
    assert node_op.introspect(body["accessToken"])["active"] is True
    assert body["tokenType"] == "Bearer" and "openid" in body["scope"]
    assert datetime.fromisoformat(body["expiresAt"]) > datetime.now(UTC) + timedelta(minutes=50)
    assert "no-store" in answer.headers["Cache-Control"]
    assert refreshes(node_op) == before


def test_signed_out_is_401_and_no_such_account_404(alice: SignedIn) -> None:
    signed_out = alice.app.test_client().get("/auth/token/op-basic")
    assert signed_out.status_code == 401 and signed_out.json == {"error": "SessionRequired"}
    for provider in ("op-post", "nope", "email"):
        answer = alice.token(provider)
        assert answer.status_code == 404 and answer.json["error"] == "NotFound", provider


def test_hostile_provider_ids_are_404_not_errors(alice: SignedIn) -> None:
    for provider in ("a" * 5000, "%00", "op-basic%0d%0aX-Evil:%201", "%ff%fe"):
        answer = alice.token(provider)
        assert answer.status_code == 404 and answer.json["error"] == "NotFound", provider
        assert "X-Evil" not in answer.headers
    # A slash is no provider id: no route, the site's plain 404.
    assert alice.token("..%2f..%2fsession").status_code == 404


def test_provider_access_token_for_the_application(alice: SignedIn) -> None:
    from webapp.flows.provider_tokens import NoProviderAccount, provider_access_token

    with alice.app.test_request_context():
        assert provider_access_token(alice.user_id, "op-basic") == alice.account().access_token
        with pytest.raises(NoProviderAccount):
            provider_access_token(alice.user_id, "op-post")


# -- refreshed when due, once -----------------------------------------------------------


def test_due_token_is_refreshed_and_the_rotated_refresh_token_kept(
    node_op: NodeOP, alice: SignedIn
) -> None:
    old = alice.account()
    alice.expire_in(30)  # within the 60 s margin
    before = refreshes(node_op)
    answer = alice.token()
    assert answer.status_code == 200
    assert refreshes(node_op) == before + 1
    new = alice.account()
    assert answer.json["accessToken"] == new.access_token != old.access_token
    assert new.refresh_token and new.refresh_token != old.refresh_token
    assert new.expires_at > datetime.now(UTC) + timedelta(minutes=50)
    # The provider retired the old refresh token; the new tokens work.
    assert node_op.introspect(old.refresh_token)["active"] is False
    assert node_op.introspect(new.access_token)["active"] is True
    assert node_op.introspect(new.refresh_token)["active"] is True
    # Fresh now: asked again, nothing more reaches the provider.
    assert alice.token().json["accessToken"] == new.access_token
    assert refreshes(node_op) == before + 1


def test_refresh_margin_follows_the_clock(node_op: NodeOP, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")], AUTH_TOKEN_REFRESH_MARGIN="600")
    alice = sign_in(app)
    expires = alice.account().expires_at
    before = refreshes(node_op)
    with freeze_time(expires - timedelta(seconds=700), tick=True):
        assert alice.token().status_code == 200
    assert refreshes(node_op) == before
    with freeze_time(expires - timedelta(seconds=500), tick=True):
        assert alice.token().status_code == 200
    assert refreshes(node_op) == before + 1


@pytest.mark.sqlite_too
def test_twenty_threads_refresh_once(node_op: NodeOP, alice: SignedIn) -> None:
    alice.expire_in(10)
    cookie = alice.client.get_cookie(COOKIE)
    assert cookie is not None
    before = refreshes(node_op)
    start = threading.Barrier(20)

    def ask(_: int) -> tuple[int, str]:
        client = alice.app.test_client()
        client.set_cookie(COOKIE, cookie.value)
        start.wait()
        answer = client.get("/auth/token/op-basic")
        return answer.status_code, answer.json["accessToken"]

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, range(20)))
    assert {status for status, _ in answers} == {200}
    assert len({token for _, token in answers}) == 1
    assert refreshes(node_op) == before + 1
    assert answers[0][1] == alice.account().access_token


@pytest.mark.sqlite_too
def test_two_app_processes_refresh_once(
    node_op: NodeOP, alice: SignedIn, database_url: str, tmp_path: Path
) -> None:
    config = write_providers_toml(tmp_path / "auth.toml", [node_op.provider_config("op-basic")])
    alice.expire_in(10)
    cookie = alice.client.get_cookie(COOKIE)
    assert cookie is not None
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    settings = {"database": database_url, "AUTH_CONFIG": str(config)}
    before = refreshes(node_op)
    with (
        run_server(tmp_path / "a", **settings) as first,
        run_server(tmp_path / "b", **settings) as second,
    ):
        start = threading.Barrier(20)

        def ask(i: int) -> tuple[int, str]:
            server = first if i % 2 else second
            start.wait()
            answer = requests.get(
                f"{server.url}/auth/token/op-basic", cookies={COOKIE: cookie.value}, timeout=30
            )
            return answer.status_code, answer.json().get("accessToken", answer.text)

        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(ask, range(20)))
    assert {status for status, _ in answers} == {200}, answers
    assert len({token for _, token in answers}) == 1
    assert refreshes(node_op) == before + 1


# -- refresh failures -------------------------------------------------------------------


def test_refused_refresh_clears_the_dead_tokens_and_answers_409(
    node_op: NodeOP, alice: SignedIn, caplog: pytest.LogCaptureFixture
) -> None:
    dead = alice.account()
    node_op.revoke(dead.refresh_token)
    alice.expire_in(10)
    answer = alice.token()
    assert answer.status_code == 409
    assert answer.json["error"] == "RefreshAccessTokenError"
    cleared = alice.account()
    assert (cleared.access_token, cleared.refresh_token, cleared.expires_at) == (None, None, None)
    assert cleared.id == dead.id  # the account stays linked: signing in again renews it
    assert any("refused to refresh" in r.getMessage() for r in caplog.records)
    assert not any(dead.refresh_token in r.getMessage() for r in caplog.records)
    # Nothing left to try: the same answer, without asking the provider.
    assert alice.token().status_code == 409
    # Signing in again stores new tokens, and they are handed out.
    sign_in(alice.app, browser=alice.browser)
    assert alice.token().json["accessToken"] == alice.account().access_token


def test_provider_down_answers_503_and_keeps_the_tokens(
    node_op: NodeOP, alice: SignedIn, make_oauth_app: Any
) -> None:
    down = f"http://127.0.0.1:{free_port()}/token"
    broken = make_oauth_app([node_op.provider_config("op-basic", token_endpoint=down)])
    kept = alice.account()
    alice.expire_in(10)
    client = broken.test_client()
    cookie = alice.client.get_cookie(COOKIE)
    assert cookie is not None
    client.set_cookie(COOKIE, cookie.value)
    answer = client.get("/auth/token/op-basic")
    assert answer.status_code == 503 and answer.json["error"] == "ProviderUnavailable"
    assert answer.headers["Retry-After"].isdigit()
    after = alice.account()
    assert (after.access_token, after.refresh_token) == (kept.access_token, kept.refresh_token)
    # Back up (the working app): the kept refresh token still works.
    assert alice.token().status_code == 200


# -- revocation -------------------------------------------------------------------------


def csrf_headers(browser: Browser) -> dict[str, str]:
    return {"X-CSRFToken": browser.csrf()}


def with_two_accounts(node_op: NodeOP, make_oauth_app: Any, **basic: Any) -> SignedIn:
    """Alice signed in with op-basic, then op-post linked (both recent)."""
    app = make_oauth_app(
        [node_op.provider_config("op-basic", **basic), node_op.provider_config("op-post")]
    )
    alice = sign_in(app)
    assert error_of(alice.browser.sign_in("op-post", login_hint="alice")) is None
    return alice


def test_unlink_revokes_at_the_provider(node_op: NodeOP, make_oauth_app: Any) -> None:
    alice = with_two_accounts(node_op, make_oauth_app)
    account = alice.account()
    assert node_op.introspect(account.access_token)["active"] is True
    answer = alice.client.post(
        f"/account/api/accounts/{account.id}/unlink", headers=csrf_headers(alice.browser)
    )
    assert answer.status_code == 200, answer.json
    assert node_op.introspect(account.refresh_token)["active"] is False
    assert node_op.introspect(account.access_token)["active"] is False
    # The other account's grant is untouched.
    assert node_op.introspect(alice.account("op-post").access_token, "op-basic")["active"]


def test_deleting_the_user_revokes_every_account(node_op: NodeOP, make_oauth_app: Any) -> None:
    alice = with_two_accounts(node_op, make_oauth_app)
    accounts = [alice.account("op-basic"), alice.account("op-post")]
    answer = alice.client.post(
        "/account/api/delete", json={"confirm": "DELETE"}, headers=csrf_headers(alice.browser)
    )
    assert answer.status_code == 200, answer.json
    for account in accounts:
        assert node_op.introspect(account.access_token)["active"] is False, account.provider


def test_failed_revocation_does_not_block_the_unlink(
    node_op: NodeOP, make_oauth_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    down = f"http://127.0.0.1:{free_port()}/revoke"
    alice = with_two_accounts(node_op, make_oauth_app, revocation_endpoint=down)
    account = alice.account()
    failures: list[dict[str, Any]] = []

    def count(_sender: Any, **details: Any) -> None:
        failures.append(details)

    with revocation_failed.connected_to(count):
        answer = alice.client.post(
            f"/account/api/accounts/{account.id}/unlink", headers=csrf_headers(alice.browser)
        )
    assert answer.status_code == 200
    with alice.app.app_context():
        assert db.session.get(Account, account.id) is None
    assert [(f["provider"], f["user_id"]) for f in failures] == [("op-basic", alice.user_id)]
    assert any("revoking op-basic" in r.getMessage() for r in caplog.records)
    # Nothing reached the provider: the token still works there.
    assert node_op.introspect(account.access_token)["active"] is True


@pytest.mark.parametrize("revoke_on_signout", [True, False])
def test_revoke_on_signout(node_op: NodeOP, make_oauth_app: Any, revoke_on_signout: bool) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic", revoke_on_signout=revoke_on_signout)])
    alice = sign_in(app)
    before = alice.account()
    signed_out = alice.client.post("/auth/signout", data={"csrfToken": alice.browser.csrf()})
    assert signed_out.status_code == 302
    assert node_op.introspect(before.access_token)["active"] is not revoke_on_signout
    after = alice.account()
    assert after.id == before.id
    if revoke_on_signout:
        assert (after.access_token, after.refresh_token) == (None, None)
    else:
        assert after.refresh_token == before.refresh_token


def test_revoke_tokens_command(node_op: NodeOP, alice: SignedIn) -> None:
    before = alice.account()
    runner = alice.app.test_cli_runner()
    other = runner.invoke(args=["auth", "revoke-tokens", "--user", "alice@example.com",
                                "--provider", "op-post"])  # fmt: skip
    assert other.exit_code == 0 and "0 of 0 account(s)" in other.output
    assert node_op.introspect(before.access_token)["active"] is True
    result = runner.invoke(args=["auth", "revoke-tokens", "--user", "Alice@Example.com"])
    assert result.exit_code == 0, result.output
    assert f"account {before.id} (op-basic): revoked" in result.output
    assert "1 of 1 account(s) revoked" in result.output
    assert node_op.introspect(before.access_token)["active"] is False
    after = alice.account()
    assert (after.access_token, after.refresh_token) == (None, None)
    assert alice.token().status_code == 409


@pytest.mark.parametrize("client_id", sorted(CLIENT_METHODS))
def test_refresh_and_revocation_authenticate_as_configured(
    node_op: NodeOP, make_oauth_app: Any, client_id: str
) -> None:
    """Each token endpoint auth method refreshes at the token endpoint and revokes at the
    revocation endpoint (the JWT methods' assertions name the endpoint they are sent to)."""
    alice = sign_in(make_oauth_app([node_op.provider_config(client_id)]), client_id)
    old = alice.account(client_id)
    alice.expire_in(10, client_id)
    before = refreshes(node_op, client_id)
    answer = alice.token(client_id)
    assert answer.status_code == 200, answer.json
    assert refreshes(node_op, client_id) == before + 1
    assert answer.json["accessToken"] != old.access_token
    result = alice.app.test_cli_runner().invoke(
        args=["auth", "revoke-tokens", "--user", "alice@example.com"]
    )
    assert result.exit_code == 0 and "1 of 1 account(s) revoked" in result.output, result.output
    assert node_op.introspect(answer.json["accessToken"])["active"] is False
