"""Single sign-on by e-mail domain in a real browser (docs/how-to/sso-by-domain.md): typing
an Acme address into the e-mail field offers "Continue with Acme staff", which signs in at
the test OpenID Provider and comes back signed in; with JavaScript on (the chooser posts in
place), off (full pages), and in Arabic.

The live app here is one of its own: e-mail sign-in and Acme's provider declared for
acme.example, a client of its own oidc-provider holding Ann's account, keyed by her
address (the form's login_hint picks the account there).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any
from unittest import mock

import pytest
from playwright.sync_api import expect

from ..support import oauth as op_support
from ..support.browser import Inbox, LiveOP, served_with_op

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ANN = "ann@acme.example"


class AcmeLiveOP(LiveOP):
    """The live server's OpenID Provider, with Ann's account added to the shared ones (for
    this instance's configuration only: the dict is restored once it is written)."""

    def start(self) -> None:
        account = {"email": ANN, "email_verified": True, "name": "Ann at Acme"}
        with mock.patch.dict(op_support.ACCOUNTS, {ANN: account}):
            super().start()


@pytest.fixture(scope="module")
def acme_origin(
    database_url: str, smtp_inbox: Inbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("acme-live")

    def entries(op: LiveOP) -> list[dict[str, Any]]:
        return [op.provider_config("op-basic", name="Acme staff", domains=["acme.example"])]

    with served_with_op(
        partial(AcmeLiveOP, workdir), entries, database_url, smtp_inbox, workdir
    ) as (origin, _app, _op):
        yield origin


def walk(page: Any, origin: str, *, field: str, button: str, offer: str, go_on: str) -> None:
    """From typing Ann's address to coming back signed in (the page's words as given)."""
    page.goto(f"{origin}/auth/signin")
    page.get_by_label(field).fill(ANN)
    page.get_by_role("button", name=button).click()
    expect(page.get_by_text(offer)).to_be_visible()
    page.get_by_role("button", name=go_on).click()
    page.wait_for_url(f"{origin}/")
    expect(page.locator("body")).to_contain_text(ANN)


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_an_acme_address_continues_with_acme_and_signs_in(
    new_page: Any, acme_origin: str, smtp_inbox: Inbox, javascript: bool
) -> None:
    page = new_page(java_script_enabled=javascript, base_url=acme_origin)
    sent = len(smtp_inbox.messages)
    page.goto(f"{acme_origin}/auth/signin")
    expect(page.locator("[data-island=chooser]")).to_have_count(1 if javascript else 0)
    page.get_by_label("E-mail address").fill(ANN)
    page.get_by_role("button", name="Sign in with E-mail").click()
    offer = page.get_by_text(f"{ANN} signs in through Acme staff.")
    expect(offer).to_be_visible()
    if javascript:
        # Swapped in place by the chooser: the address bar stays, focus is on the offer.
        assert page.url == f"{acme_origin}/auth/signin"
        expect(offer).to_be_focused()
    page.get_by_role("button", name="Continue with Acme staff").click()
    page.wait_for_url(f"{acme_origin}/")
    expect(page.get_by_text("You are signed in as")).to_contain_text(ANN)
    assert len(smtp_inbox.messages) == sent  # no link was mailed


def test_in_arabic(new_page: Any, acme_origin: str) -> None:
    page = new_page(base_url=acme_origin)
    page.context.add_cookies([{"name": "auth.locale", "value": "ar", "url": acme_origin}])
    walk(
        page,
        acme_origin,
        field="عنوان البريد الإلكتروني",
        button="تسجيل الدخول باستخدام البريد الإلكتروني",
        offer=f"يسجّل {ANN} الدخول عبر Acme staff.",
        go_on="المتابعة باستخدام Acme staff",
    )
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
