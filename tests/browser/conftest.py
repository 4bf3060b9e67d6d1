"""Browser test fixtures: the app on a live loopback server, Debian's Chromium, helpers.

One live server per database (SQLite and PostgreSQL) for the whole test session, with
every kind of provider: e-mail through a real SMTP server (aiosmtpd), the demo
credentials, and six OpenID Connect providers, all clients of the real OpenID Provider
(the npm package oidc-provider) that ``tests/op/server.mjs`` runs. The browser is Debian's
``/usr/bin/chromium`` driven by Playwright; Playwright never downloads one.
"""

from __future__ import annotations

import email
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from flask import Flask
from werkzeug.serving import make_server

from webapp import create_app
from webapp.extensions import db

from ..conftest import _empty_tables, base_config
from ..helpers import free_port
from ..oauth_support import NodeOP

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"

#: The OIDC providers the live app offers: (client id at the OP, name, OP account).
#: The OP has no login form; ``login_hint`` picks the account (see tests/op/server.mjs).
OIDC_PROVIDERS = [
    ("op-basic", "Acme SSO", "alice"),
    ("op-post", "Globex", "ann"),
    ("op-jwt", "Initech", "alice"),
    ("op-rsa", "Umbrella", "alice"),
    ("op-ec", "Hooli", "alice"),
    ("op-public", "Stark ID", "deny"),  # its OP account declines: AccessDenied
]


class _Inbox:
    """aiosmtpd handler keeping every message it receives."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.messages: list[EmailMessage] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=policy.default)
        with self.lock:
            self.messages.append(message)  # type: ignore[arg-type]
        return "250 OK"

    def last_to(self, address: str) -> EmailMessage:
        with self.lock:
            for message in reversed(self.messages):
                if address in str(message["To"]):
                    return message
        raise AssertionError(f"no message to {address}")


@pytest.fixture(scope="session")
def smtp_inbox() -> Iterator[_Inbox]:
    inbox = _Inbox(free_port())
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


class LiveOP(NodeOP):
    """The test OpenID Provider, with redirect URIs on the live server's origin."""

    def __init__(self, workdir: Path, app_origin: str) -> None:
        super().__init__(workdir)
        self.app_origin = app_origin

    def client_metadata(self, client_id: str, method: str) -> dict[str, Any]:
        meta = super().client_metadata(client_id, method)
        meta["redirect_uris"] = [f"{self.app_origin}/auth/callback/{client_id}"]
        return meta


@dataclass
class LiveServer:
    url: str
    app: Any
    inbox: _Inbox
    names: dict[str, str] = field(default_factory=dict)
    #: The OpenID Provider its OIDC providers are clients of (to approve device codes, add
    #: clients for another origin).
    op: LiveOP | None = None


def _toml(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries:
        lines.append("[[providers]]")
        for key, value in entry.items():
            if isinstance(value, dict):
                inner = ", ".join(f'{k} = "{v}"' for k, v in value.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f'{key} = "{value}"')
    return "\n".join(lines) + "\n"


@contextmanager
def served(build: Callable[[str], Flask]) -> Iterator[tuple[str, Flask]]:
    """Serve ``build(origin)``'s app with werkzeug in a thread on a free loopback port;
    yield the origin and the app."""
    holder: dict[str, Any] = {}

    def closing(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        # Werkzeug's server never calls the answer's close() when the browser drops the
        # connection (a page left while its favicon downloads); a production server does.
        # Closing it here, when this generator is finalised, closes a served file
        # explicitly instead of leaving it to the garbage collector's ResourceWarning.
        body = holder["app"](environ, start_response)
        try:
            yield from body
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()

    server = make_server("127.0.0.1", 0, closing, threaded=True)
    origin = f"http://127.0.0.1:{server.server_port}"
    app = holder["app"] = build(origin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield origin, app
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        with app.app_context():
            db.engine.dispose()


@pytest.fixture(scope="session")
def live_server(
    database_url: str, smtp_inbox: _Inbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The app served by werkzeug in a thread on a free loopback port (one per database)."""
    workdir = tmp_path_factory.mktemp("live")
    started: list[LiveOP] = []

    def build(origin: str) -> Flask:
        op = LiveOP(workdir, origin)
        started.append(op)
        op.start()
        entries = [
            op.provider_config(client_id, name=name, authorization_params={"login_hint": who})
            for client_id, name, who in OIDC_PROVIDERS
        ]
        config = workdir / "providers.toml"
        config.write_text(_toml(entries))
        return create_app(
            base_config(
                database_url,
                AUTH_URL=f"{origin}/auth",
                AUTH_CONFIG=str(config),
                EMAIL_SERVER=f"smtp://127.0.0.1:{smtp_inbox.port}",
            ),
            environ={},
        )

    try:
        with served(build) as (origin, app):
            names = {c: n for c, n, _ in OIDC_PROVIDERS}
            yield LiveServer(origin, app, smtp_inbox, names, started[0])
    finally:
        for op in started:
            op.stop()


@pytest.fixture(autouse=True)
def _fresh_database(live_server: LiveServer) -> Iterator[None]:
    """Empty the live server's tables after each test: users must not leak between tests
    (an OIDC sign-in is refused when another test left a user with the same e-mail)."""
    yield
    with live_server.app.app_context():
        _empty_tables()


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


class Problems:
    """Console errors, uncaught exceptions and failed subresources of a test's pages.

    A Content Security Policy violation is a console error. Chromium also logs a console
    error for every non-2xx response, the page itself included (an error page's 403 is
    intended), so those are judged by the response instead: only a failed subresource
    (script, style, image, fetch) is a problem.
    """

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, page: Any) -> Any:
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.seen.append(f"uncaught: {e}"))
        page.on("response", self._response)
        return page

    def _console(self, message: Any) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.seen.append(message.text)

    def _response(self, response: Any) -> None:
        if response.status >= 400 and not response.request.is_navigation_request():
            self.seen.append(f"{response.status} {response.request.method} {response.url}")


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


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Run axe-core in ``page``; return the serious and critical violations."""
    # evaluate() runs through the DevTools protocol, which the page's CSP does not govern;
    # a <script> tag with axe's source would be refused, as it should be.
    page.evaluate(AXE.read_text() + "\n;undefined")
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def demo_signin(page: Any, email: str, *, javascript: bool = True, lands_on: str = "**/") -> None:
    """Sign in with the demo credentials form on the sign-in page (JS on or off); wait
    for the page it lands on (``lands_on``, a glob)."""
    page.goto("/auth/signin")
    if javascript:
        # Fill the island's form, not the server's one it is about to replace.
        page.locator("[data-island=chooser]").wait_for()
    form = page.locator("form", has=page.get_by_label("Password"))
    form.get_by_label("E-mail", exact=True).fill(email)
    form.get_by_label("Password").fill("demo")
    form.get_by_role("button", name="Sign in with Demo account").click()
    page.wait_for_url(lands_on)
