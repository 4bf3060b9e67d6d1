"""OpenID Connect sign-in against a real provider (oidc-provider on loopback), docs/oauth.md."""

from __future__ import annotations

import hashlib
import socket
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp.storage.db import db
from webapp.storage.models import Account, Session, User

from .support.oauth import APP_ORIGIN, CLIENT_METHODS, Browser, email_sign_in, error_of, query_of
from .support.servers import free_port
from .support.signin import demo_sign_in

pytestmark = pytest.mark.e2e


def rows(app: Flask, model: Any) -> list[Any]:
    with app.app_context():
        found = list(db.session.execute(sa.select(model).order_by(model.id)).scalars())
        db.session.expunge_all()
        return found


def flow_cookie(provider_id: str, item: str, state: str) -> str:
    """The name of one sign-in flow's cookie (see webapp.browser_state.oauth_checks)."""
    return f"auth.{item}.{provider_id}.{hashlib.sha256(state.encode()).hexdigest()[:16]}"


@pytest.mark.parametrize("client_id", sorted(CLIENT_METHODS))
def test_every_client_auth_method_signs_in(
    node_op: Any, make_oauth_app: Any, client_id: str
) -> None:
    app = make_oauth_app([node_op.provider_config(client_id)])
    browser = Browser(app.test_client())
    response = browser.sign_in(client_id, login_hint="alice", callback_url="/after")
    assert response.status_code == 302
    assert response.headers["Location"] == APP_ORIGIN + "/after"
    [user] = rows(app, User)
    [account] = rows(app, Account)
    [session] = rows(app, Session)
    assert (user.email, user.name) == ("alice@example.com", "Alice")
    assert user.email_verified is not None
    assert (account.provider, account.type, account.provider_account_id) == (
        client_id,
        "oidc",
        "alice",
    )
    assert account.user_id == user.id and session.user_id == user.id
    assert account.access_token and account.id_token and account.refresh_token
    assert account.token_type.lower() == "bearer"
    assert "openid" in account.scope and account.expires_at is not None
    assert session.provider == client_id


def test_authorization_request_carries_checks_and_extra_params(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    response = browser.start("op-basic", prompt="login", login_hint="alice", state="mine")
    url = response.headers["Location"]
    assert url.startswith(node_op.issuer + "/auth?")
    params = query_of(url)
    assert params["prompt"] == "login" and params["login_hint"] == "alice"
    assert params["state"] != "mine"  # the flow's own state wins over the query string
    assert params["code_challenge_method"] == "S256" and len(params["code_challenge"]) == 43
    assert len(params["nonce"]) >= 32
    assert params["redirect_uri"] == APP_ORIGIN + "/auth/callback/op-basic"
    set_cookies = response.headers.getlist("Set-Cookie")
    for item in ("state", "pkce", "nonce"):
        [cookie] = [
            c
            for c in set_cookies
            if c.startswith(flow_cookie("op-basic", item, params["state"]) + "=")
        ]
        assert "HttpOnly" in cookie and "Max-Age=900" in cookie and "SameSite=Lax" in cookie
        # Encrypted: neither the state nor the nonce appears in any cookie.
        assert params["state"] not in cookie and params["nonce"] not in cookie


def test_check_cookies_are_cleared_after_the_callback(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    start = browser.start("op-basic", login_hint="alice")
    state = query_of(start.headers["Location"])["state"]
    done = browser.client.get(browser.authorize(start.headers["Location"]))
    assert error_of(done) is None
    for item in ("state", "pkce", "nonce"):
        assert browser.client.get_cookie(flow_cookie("op-basic", item, state)) is None


def test_pkce_verifier_is_enforced_by_the_provider(node_op: Any, make_oauth_app: Any) -> None:
    """A code redeemed with another flow's verifier is refused: the verifier is checked."""
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    first = browser.start("op-basic", login_hint="alice").headers["Location"]
    second = browser.start("op-basic", login_hint="alice").headers["Location"]
    state1, state2 = query_of(first)["state"], query_of(second)["state"]
    other = browser.client.get_cookie(flow_cookie("op-basic", "pkce", state2))
    browser.client.set_cookie(flow_cookie("op-basic", "pkce", state1), other.value)
    response = browser.client.get(browser.authorize(first))
    assert error_of(response) == "OAuthCallback"
    assert rows(app, User) == [] and rows(app, Session) == []


def test_missing_pkce_cookie_fails(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    url = browser.start("op-basic", login_hint="alice").headers["Location"]
    browser.client.delete_cookie(flow_cookie("op-basic", "pkce", query_of(url)["state"]))
    assert error_of(browser.client.get(browser.authorize(url))) == "OAuthCallback"
    assert rows(app, Account) == []


def test_tokens_are_updated_on_the_next_sign_in(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("op-basic", login_hint="alice")) is None
    [before] = rows(app, Account)
    assert error_of(browser.sign_in("op-basic", login_hint="alice")) is None
    [after] = rows(app, Account)
    assert after.id == before.id
    assert after.access_token != before.access_token
    assert after.id_token != before.id_token
    assert after.refresh_token and after.refresh_token != before.refresh_token
    assert len(rows(app, User)) == 1


def test_user_cancels_is_access_denied(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    response = browser.sign_in("op-basic", login_hint="deny")
    assert error_of(response) == "AccessDenied"
    page = browser.client.get(response.headers["Location"])
    assert page.status_code == 403
    assert rows(app, User) == [] and rows(app, Session) == []


def test_tampered_state_fails_and_stores_nothing(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    url = browser.start("op-basic", login_hint="alice").headers["Location"]
    callback = browser.authorize(url)
    state = query_of(callback)["state"]
    tampered = callback.replace(f"state={state}", f"state={state[:-2]}xx")
    assert error_of(browser.client.get(tampered)) == "OAuthCallback"
    assert rows(app, User) == [] and rows(app, Account) == [] and rows(app, Session) == []


def test_tampered_code_fails(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    callback = browser.authorize(browser.start("op-basic", login_hint="alice").headers["Location"])
    code = query_of(callback)["code"]
    tampered = callback.replace(code, code[:-3] + "abc")
    assert error_of(browser.client.get(tampered)) == "OAuthCallback"
    assert rows(app, User) == []


def test_replayed_callback_fails(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    start = browser.start("op-basic", login_hint="alice")
    state = query_of(start.headers["Location"])["state"]
    saved = {
        item: browser.client.get_cookie(flow_cookie("op-basic", item, state)).value
        for item in ("state", "pkce", "nonce")
    }
    callback = browser.authorize(start.headers["Location"])
    assert error_of(browser.client.get(callback)) is None
    # The same browser: its flow cookies are gone.
    assert error_of(browser.client.get(callback)) == "OAuthCallback"
    # An attacker holding the URL and the old cookies: the code works only once.
    thief = app.test_client()
    for item, value in saved.items():
        thief.set_cookie(flow_cookie("op-basic", item, state), value)
    assert error_of(thief.get(callback)) == "OAuthCallback"
    assert len(rows(app, Session)) == 1


def test_parallel_tabs_all_complete(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    tabs = [
        browser.start("op-basic", login_hint="alice", callback_url=f"/tab{i}") for i in range(3)
    ]
    callbacks = [browser.authorize(tab.headers["Location"]) for tab in tabs]
    for i in (2, 0, 1):
        response = browser.client.get(callbacks[i])
        assert response.headers["Location"] == f"{APP_ORIGIN}/tab{i}"
    assert len(rows(app, User)) == 1


# -- account linking (docs/oauth.md, "Account linking") --------------------------------


def test_known_account_signs_in_its_user(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    Browser(app.test_client()).sign_in("op-basic", login_hint="carol")
    response = Browser(app.test_client()).sign_in("op-basic", login_hint="carol")
    assert error_of(response) is None
    [user] = rows(app, User)
    assert user.email is None and user.name == "Carol"
    assert [s.user_id for s in rows(app, Session)] == [user.id, user.id]


def test_signed_in_user_gets_the_new_account_linked(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(browser.sign_in("op-basic", login_hint="alice")) is None
    [user] = rows(app, User)
    assert user.email == "someone@example.com"
    assert sorted(a.provider for a in rows(app, Account)) == ["demo", "op-basic"]
    assert {a.user_id for a in rows(app, Account)} == {user.id}


def test_account_of_another_user_is_not_taken_over_while_signed_in(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    assert error_of(Browser(app.test_client()).sign_in("op-basic", login_hint="carol")) is None
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(browser.sign_in("op-basic", login_hint="carol")) == "OAuthAccountNotLinked"
    carol, someone = rows(app, User)
    assert [a.user_id for a in rows(app, Account) if a.provider == "op-basic"] == [carol.id]


def test_signed_in_user_cannot_link_an_account_with_another_users_email(
    node_op: Any, make_oauth_app: Any, mailbox: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")], EMAIL_SERVER=mailbox.url())
    # Alice owns her address (proven by e-mail); an unverified holder would not block.
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    browser = Browser(app.test_client())
    assert error_of(demo_sign_in(browser.client, "someone@example.com")) is None
    assert error_of(browser.sign_in("op-basic", login_hint="alice")) == "OAuthAccountNotLinked"
    assert [a.provider for a in rows(app, Account)] == ["email", "demo"]


def test_email_of_another_user_is_not_linked_by_default(
    node_op: Any, make_oauth_app: Any, mailbox: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")], EMAIL_SERVER=mailbox.url())
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    browser = Browser(app.test_client())
    response = browser.sign_in("op-basic", login_hint="alice")
    assert error_of(response) == "OAuthAccountNotLinked"
    assert len(rows(app, User)) == 1
    assert [a.provider for a in rows(app, Account)] == ["email"]
    assert browser.client.get_cookie("auth.session-token") is None


def test_email_linking_when_allowed_and_verified(
    node_op: Any, make_oauth_app: Any, mailbox: Any
) -> None:
    app = make_oauth_app(
        [node_op.provider_config("op-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, "alice@example.com")
    response = Browser(app.test_client()).sign_in("op-basic", login_hint="alice")
    assert error_of(response) is None
    [user] = rows(app, User)
    assert {a.user_id for a in rows(app, Account)} == {user.id}
    assert user.email_verified is not None


def test_email_linking_allowed_but_unverified_makes_a_separate_user(
    node_op: Any, make_oauth_app: Any, mailbox: Any
) -> None:
    """An unverified claim is never linked, and not refused either: refusing
    would tell a prober that the address has an account."""
    app = make_oauth_app(
        [node_op.provider_config("op-basic", allow_dangerous_email_account_linking=True)],
        EMAIL_SERVER=mailbox.url(),
    )
    email_sign_in(app.test_client(), mailbox, "bob@example.com")
    response = Browser(app.test_client()).sign_in("op-basic", login_hint="bob")
    assert error_of(response) is None
    owner, claimant = rows(app, User)
    assert owner.email_verified is not None and claimant.email_verified is None
    assert [(a.provider, a.user_id) for a in rows(app, Account)] == [
        ("email", owner.id),
        ("op-basic", claimant.id),
    ]


def test_new_identity_creates_user_and_account(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    Browser(app.test_client()).sign_in("op-basic", login_hint="bob")
    [user] = rows(app, User)
    assert user.email == "bob@example.com" and user.email_verified is None


# -- the provider down or stalling -----------------------------------------------------


def test_provider_down_is_oauth_signin(make_oauth_app: Any, node_op: Any) -> None:
    # Nothing listens on the port: connection refused.
    issuer = f"http://127.0.0.1:{free_port()}"
    app = make_oauth_app([node_op.provider_config("op-basic", issuer=issuer)])
    browser = Browser(app.test_client())
    response = browser.start("op-basic")
    assert error_of(response) == "OAuthSignin"
    assert not [c for c in response.headers.getlist("Set-Cookie") if "auth.state" in c]


def test_provider_stalling_is_oauth_signin_within_the_timeout(
    make_oauth_app: Any, node_op: Any
) -> None:
    with socket.socket() as sock:
        # Accepts connections (the kernel's backlog) but never answers.
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = make_oauth_app(
            [node_op.provider_config("op-basic", issuer=issuer)], AUTH_HTTP_READ_TIMEOUT="0.5"
        )
        response = Browser(app.test_client()).start("op-basic")
    assert error_of(response) == "OAuthSignin"


def test_json_mode_returns_the_authorization_url_and_sets_the_cookies(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    response = browser.client.post(
        "/auth/signin/op-basic?login_hint=alice", data={"csrfToken": browser.csrf(), "json": "true"}
    )
    assert response.status_code == 200
    url = response.json["url"]
    assert url.startswith(node_op.issuer + "/auth?")
    assert error_of(browser.client.get(browser.authorize(url))) is None


def test_signin_without_csrf_starts_nothing(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    response = app.test_client().post("/auth/signin/op-basic", data={})
    assert error_of(response) == "MissingCSRF"
    assert not [c for c in response.headers.getlist("Set-Cookie") if "auth.state" in c]
