"""The Chromium suite's plain helpers (its fixtures are in tests/browser/conftest.py): the
live server's parts (``Inbox``, an SMTP server's messages; ``LiveOP``, the test OpenID
Provider with redirect URIs on the live origin; ``served``, an app in a werkzeug thread),
what a page must not show (``Problems``, ``axe_violations``), and in a page ``demo_signin``
and ``set_up_app`` (two-step verification turned on from the account page).
"""

from __future__ import annotations

import email
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pyotp
from flask import Flask
from playwright.sync_api import expect
from werkzeug.serving import make_server

from webapp import create_app
from webapp.storage.db import db

from .config import base_config
from .oauth import NodeOP, write_providers_toml

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


class Inbox:
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
    inbox: Inbox
    names: dict[str, str] = field(default_factory=dict)
    #: The OpenID Provider its OIDC providers are clients of (to approve device codes, add
    #: clients for another origin).
    op: LiveOP | None = None


def live_app(
    database_url: str, origin: str, entries: list[dict[str, Any]], inbox: Inbox, folder: Path
) -> Flask:
    """The app a live server serves at ``origin``: on ``database_url``, with the provider
    tables ``entries`` (written to ``folder``), its mail to ``inbox``."""
    providers = write_providers_toml(folder / "providers.toml", entries)
    return create_app(
        base_config(
            database_url,
            AUTH_URL=f"{origin}/auth",
            AUTH_CONFIG=str(providers),
            EMAIL_SERVER=f"smtp://127.0.0.1:{inbox.port}",
        ),
        environ={},
    )


@contextmanager
def served_with_op(
    make_op: Callable[[str], LiveOP],
    entries: Callable[[LiveOP], list[dict[str, Any]]],
    database_url: str,
    inbox: Inbox,
    folder: Path,
) -> Iterator[tuple[str, Flask, LiveOP]]:
    """``served`` for an app whose OIDC providers are clients of an OpenID Provider started
    for the live origin (``make_op(origin)``; its provider tables ``entries(op)``); yield
    the origin, the app and the OP, and stop the OP afterwards."""
    started: list[LiveOP] = []

    def build(origin: str) -> Flask:
        op = make_op(origin)
        started.append(op)
        op.start()
        return live_app(database_url, origin, entries(op), inbox, folder)

    try:
        with served(build) as (origin, app):
            yield origin, app, started[0]
    finally:
        for op in started:
            op.stop()


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


#: The islands: where one mounts, and what it mounts there.
ISLANDS = [
    ("#provider-chooser", "[data-island=chooser]"),
    ("#error-page", "[data-island=error-page]"),
]


def settled(page: Any) -> None:
    """Wait until ``page`` is as a person would look at it: loaded (images and scripts), its
    islands mounted and its fonts in. Quicker than Playwright's "networkidle", which waits
    half a second after the last request of every page."""
    page.wait_for_load_state("load")
    for container, island in ISLANDS:
        if page.locator(container).count():
            page.locator(island).wait_for()
    page.evaluate("document.fonts.ready.then(() => undefined)")


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


def set_up_app(page: Any, *, javascript: bool, scan: bool = False) -> tuple[str, list[str]]:
    """Turn the authenticator app on from the account page; return its key and codes.
    ``scan``: also check the set-up and codes pages with axe and for sideways scrolling
    (scripts in the page: only with JavaScript on)."""
    page.goto("/account")
    page.get_by_role("link", name="Set up an authenticator app").click()
    expect(page.get_by_role("heading", name="Set up an authenticator app")).to_be_visible()
    expect(page.get_by_role("img", name=re.compile("QR code"))).to_be_visible()
    if scan and javascript:
        assert axe_violations(page) == []
        width = page.viewport_size["width"]
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    key = page.locator("#totp-key").inner_text().replace(" ", "")
    page.get_by_label("Code from the app").fill("000000")
    page.get_by_role("button", name="Turn on two-step verification").click()
    expect(page.get_by_role("alert")).to_contain_text("That code is not right")
    page.get_by_label("Code from the app").fill(pyotp.TOTP(key).now())
    page.get_by_role("button", name="Turn on two-step verification").click()
    expect(page.get_by_role("heading", name="Two-step verification is on")).to_be_visible()
    codes = page.get_by_role("list", name="Recovery codes").locator("code").all_inner_texts()
    assert len(codes) == 10
    if scan and javascript:
        assert axe_violations(page) == []
    return key, codes
