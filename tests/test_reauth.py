"""Changing sign-in methods needs a recent sign-in, confirmed with a method already linked.

The attack: a three-hour-old stolen cookie links the thief's own provider identity and
unlinks the owner's, locking her out for good. Linking and unlinking (like deleting the
account) need a session younger than AUTH_REAUTH_MAX_AGE; otherwise the person is sent to
confirm it is them and brought back to the action.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from flask import Flask
from freezegun import freeze_time

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import Account, User

from .support.oauth import Browser, FakeIdP, fake_idp
from .support.rows import row_count
from .support.signin import demo_sign_in

LATER = timedelta(hours=3)


@pytest.fixture
def idp() -> Iterator[FakeIdP]:
    with fake_idp() as provider:
        provider.userinfo = {
            "sub": "thief-1",
            "email": "thief@example.com",
            "email_verified": True,
            "name": "Thief",
        }
        provider.claims = {"sub": "thief-1"}
        yield provider


@pytest.fixture
def app(idp: FakeIdP, make_oauth_app: Callable[..., Flask]) -> Flask:
    # The demo credentials (development) are Ann's existing method; "fake" is the provider.
    return make_oauth_app([idp.provider_config("fake")], AUTH_DEMO_CREDENTIALS="true")


def _accounts(app: Flask) -> list[str]:
    with app.app_context():
        return sorted(db.session.scalars(sa.select(Account.provider)))


def test_an_old_session_cannot_link_a_provider(app: Flask, idp: FakeIdP) -> None:
    start = utcnow()
    browser = Browser(app.test_client())
    with freeze_time(start):
        demo_sign_in(browser.client)
    with freeze_time(start + LATER):
        answer = browser.start("fake")
        assert answer.headers["Location"] == (
            "http://localhost/account/confirm?next=%2Faccount%2Flink%2Ffake"
        )
        assert idp.hits["/authorize"] == 0
    assert _accounts(app) == ["demo"]


def test_the_callback_refuses_a_link_once_the_session_is_old(app: Flask, idp: FakeIdP) -> None:
    # Started while recent (the start check passes), finished after the window closed.
    start = utcnow()
    browser = Browser(app.test_client())
    with freeze_time(start) as frozen:
        demo_sign_in(browser.client)
        frozen.tick(timedelta(minutes=9))
        redirect = browser.start("fake")
        assert redirect.status_code == 302 and redirect.headers["Location"].startswith(idp.issuer)
        back = browser.authorize(redirect.headers["Location"])
        frozen.tick(timedelta(minutes=2))
        answer = browser.client.get(back)
        assert answer.headers["Location"] == (
            "http://localhost/account/confirm?next=%2Faccount%2Flink%2Ffake"
        )
    assert _accounts(app) == ["demo"]
    assert row_count(app, User) == 1


def test_confirming_with_a_linked_method_brings_the_person_back_to_link(
    app: Flask, idp: FakeIdP
) -> None:
    start = utcnow()
    browser = Browser(app.test_client())
    with freeze_time(start):
        demo_sign_in(browser.client)
    with freeze_time(start + LATER):
        confirm = browser.client.get("/account/confirm?next=/account/link/fake")
        page = confirm.get_data(as_text=True)
        # Only Ann's own method is offered, pre-filled; not the provider being linked.
        assert 'action="/auth/callback/demo"' in page and 'value="ann@example.com"' in page
        assert "/auth/signin/fake" not in page
        back = demo_sign_in(browser.client, callbackUrl="/account/link/fake")
        assert back.headers["Location"] == "http://localhost/account/link/fake"
        step = browser.client.get("/account/link/fake").get_data(as_text=True)
        assert 'action="/auth/signin/fake"' in step
        linked = browser.sign_in("fake", callback_url="/account")
        assert linked.headers["Location"] == "http://localhost/account"
    assert _accounts(app) == ["demo", "fake"]


def test_an_old_session_cannot_unlink_a_method(app: Flask, idp: FakeIdP) -> None:
    start = utcnow()
    browser = Browser(app.test_client())
    with freeze_time(start):
        demo_sign_in(browser.client)
        browser.sign_in("fake")  # linked while recent
    assert _accounts(app) == ["demo", "fake"]
    with app.app_context():
        demo_id = db.session.scalar(sa.select(Account.id).where(Account.provider == "demo"))
    with freeze_time(start + LATER):
        token = browser.csrf()
        answer = browser.client.post(
            f"/account/accounts/{demo_id}/unlink", data={"csrfToken": token}
        )
        assert answer.status_code == 303
        assert answer.headers["Location"] == (
            f"/account/confirm?next=%2Faccount%2Faccounts%2F{demo_id}%2Funlink"
        )
        htmx = browser.client.post(
            f"/account/accounts/{demo_id}/unlink",
            data={"csrfToken": token},
            headers={"HX-Request": "true"},
        )
        assert htmx.headers["HX-Redirect"].startswith("/account/confirm?next=")
        api = browser.client.post(
            f"/account/api/accounts/{demo_id}/unlink", headers={"X-CSRFToken": token}
        )
        assert (api.status_code, api.json["error"]) == (403, "RecentSignInRequired")  # type: ignore[index]
        assert api.json["confirmUrl"].startswith("http://localhost/account/confirm?")  # type: ignore[index]
        assert _accounts(app) == ["demo", "fake"]

        # Confirming with the provider itself (a method she has) brings her back.
        confirm = browser.client.get(answer.headers["Location"]).get_data(as_text=True)
        assert 'action="/auth/signin/fake"' in confirm
        back = browser.sign_in("fake", callback_url=f"/account/accounts/{demo_id}/unlink")
        assert back.headers["Location"] == f"http://localhost/account/accounts/{demo_id}/unlink"
        page = browser.client.get(f"/account/accounts/{demo_id}/unlink").get_data(as_text=True)
        form_token = re.search(r'name="csrfToken" value="([^"]+)"', page)[1]  # type: ignore[index]
        done = browser.client.post(
            f"/account/accounts/{demo_id}/unlink", data={"csrfToken": form_token}
        )
        assert done.status_code == 303 and done.headers["Location"] == "/account#accounts"
    assert _accounts(app) == ["fake"]


def test_the_window_is_a_setting(idp: FakeIdP, make_oauth_app: Callable[..., Flask]) -> None:
    app = make_oauth_app(
        [idp.provider_config("fake")], AUTH_DEMO_CREDENTIALS="true", AUTH_REAUTH_MAX_AGE="7200"
    )
    start = utcnow()
    browser = Browser(app.test_client())
    with freeze_time(start):
        demo_sign_in(browser.client)
    with freeze_time(start + timedelta(minutes=119)):
        assert browser.start("fake").headers["Location"].startswith(idp.issuer)
    with freeze_time(start + timedelta(minutes=121)):
        assert "/account/confirm" in browser.start("fake").headers["Location"]


def test_the_confirmation_page_only_returns_to_this_site(app: Flask) -> None:
    client = app.test_client()
    demo_sign_in(client)
    for target in ("https://evil.example/x", "//evil.example", "/\\evil.example"):
        page = client.get("/account/confirm", query_string={"next": target})
        assert "evil.example" not in page.get_data(as_text=True)
        assert 'name="callbackUrl" value="/account"' in page.get_data(as_text=True)
