"""Browser test fixtures: the app on a live loopback server, Debian's Chromium, pages.

One live server per database (SQLite and PostgreSQL) for the whole test session, with
every kind of provider: e-mail through a real SMTP server (aiosmtpd), the demo
credentials, and six OpenID Connect providers, all clients of the real OpenID Provider
(the npm package oidc-provider) that ``tests/op/server.mjs`` runs. The browser is Debian's
``/usr/bin/chromium`` driven by Playwright; Playwright never downloads one.

The plain helpers these fixtures and the browser tests share (``served``, ``LiveServer``,
``axe_violations``, ``demo_signin``…) are in tests/support/browser.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from ..support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    OIDC_PROVIDERS,
    Inbox,
    LiveOP,
    LiveServer,
    Problems,
    served_with_op,
)
from ..support.databases import empty_tables
from ..support.servers import free_port
from ..support.tv import TV, serving_tv


@pytest.fixture(scope="session")
def smtp_inbox() -> Iterator[Inbox]:
    inbox = Inbox(free_port())
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture(scope="session")
def live_server(
    database_url: str, smtp_inbox: Inbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The app served by werkzeug in a thread on a free loopback port (one per database)."""
    workdir = tmp_path_factory.mktemp("live")

    def entries(op: LiveOP) -> list[dict[str, Any]]:
        return [
            op.provider_config(client_id, name=name, authorization_params={"login_hint": who})
            for client_id, name, who in OIDC_PROVIDERS
        ]

    with served_with_op(partial(LiveOP, workdir), entries, database_url, smtp_inbox, workdir) as (
        origin,
        app,
        op,
    ):
        names = {c: n for c, n, _ in OIDC_PROVIDERS}
        yield LiveServer(origin, app, smtp_inbox, names, op)


@pytest.fixture(autouse=True)
def _fresh_database(live_server: LiveServer) -> Iterator[None]:
    """Empty the live server's tables after each test: users must not leak between tests
    (an OIDC sign-in is refused when another test left a user with the same e-mail)."""
    yield
    with live_server.app.app_context():
        empty_tables()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, for the whole test session."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test does)", pytrace=False
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def new_page(chromium: Any, live_server: LiveServer) -> Iterator[Any]:
    """``new_page(**context_options)``: a page in a fresh browser context (its own cookies).

    The test fails if any page logged a console error or threw, which is how a Content
    Security Policy violation shows up.
    """
    contexts: list[Any] = []
    problems = Problems()

    def make(**options: Any) -> Any:
        options.setdefault("base_url", live_server.url)
        options.setdefault("viewport", {"width": 1280, "height": 900})
        context = chromium.new_context(**options)
        context.set_default_timeout(15_000)
        contexts.append(context)
        return problems.watch(context.new_page())

    yield make
    for context in contexts:
        context.close()
    assert problems.seen == [], problems.seen


@pytest.fixture(scope="module")
def tv(
    live_server: LiveServer, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TV]:
    """The TV app on its own loopback port, sharing the live server's database (whose
    tables the live server's fixture empties after each test) and provider."""
    with serving_tv(live_server, database_url, tmp_path_factory.mktemp("tv")) as tv:
        yield tv
