"""Auth.js's own browser clients against this app, unchanged (issue 20).

The clients are next-auth v4's ``next-auth/react`` (npm ``next-auth@4``) and next-auth v5's
(``next-auth@5.0.0-beta``, built on @auth/core, installed under the alias ``next-auth-v5``);
both are test-only devDependencies. A session fixture bundles each with esbuild
(``tests/authjs_clients/build.mjs``) into a temporary folder, with ``NEXTAUTH_URL`` set to
the app's ``/auth``. Each test loads one bundle into a page of the app's own origin:
``page.route`` answers a made-up path (``/__authjs_client__/v4``) with a small page and the
bundle, so the app gains no route, and every request the client makes reaches the real app
with the browser's cookies. The tests then call ``getProviders``, ``getCsrfToken``,
``getSession``, ``signIn`` and ``signOut`` as an application would, and check what each
client promises in its own source and types (``react/index.js`` and ``react/types.d.ts``
of v4; ``react.js`` and ``lib/client.d.ts`` of v5):

- ``signIn(id, {redirect: false})`` resolves to ``{error, status, ok, url}`` (v4; ``error``
  is ``null`` when there is none) or ``{error, code, status, ok, url}`` (v5; ``error`` and
  ``code`` are ``undefined`` when there is none), with ``error`` and ``code`` read from the
  query of the ``url`` the server answered and ``url`` null when there is an error;
- ``signOut({redirect: false})`` resolves to the server's answer, ``{url}``;
- with ``redirect: true`` (the default) both send the browser to the ``url`` answered.

v4 asks for JSON with the form field ``json=true``, v5 with the header
``X-Auth-Return-Redirect: 1``; the tests check that each bundle does.

One app server (SQLite, e-mail through the shared aiosmtpd server, the development demo
credentials), one browser and one build serve the whole module; the shared live servers
(and their OpenID Provider) are not started.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from webapp import create_app
from webapp.browser_state.cookies import CSRF_COOKIE, SESSION_COOKIE
from webapp.providers.credentials import DEMO_PASSWORD

from ..support.browser import ROOT, Inbox, LiveServer, served
from ..support.config import base_config
from ..support.databases import empty_tables, migrate_database
from ..support.mail import link_of

pytestmark = pytest.mark.browser

BUILD = ROOT / "tests" / "authjs_clients" / "build.mjs"
CLIENTS = ["v4", "v5"]
#: The made-up path the client pages are served at (by page.route; the app has no such route).
HARNESS = "/__authjs_client__"
#: The demo credentials provider's id (webapp/providers/credentials.py).
DEMO = "demo"
#: How ``call`` reports a property whose value is ``undefined`` (JSON has no undefined).
UNDEFINED = "<undefined>"
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

# Await window[fn](...args) in the page. A rejection comes back as {threw: "…"}, so a test
# can say that the client threw; an own property holding undefined comes back as UNDEFINED.
CALL_JS = """
async ([fn, args, undefinedMark]) => {
  let value;
  try {
    value = await window[fn](...args);
  } catch (error) {
    return { threw: `${error && error.name}: ${error && error.message}` };
  }
  const mark = (v) => (v === undefined ? undefinedMark : v);
  if (value && typeof value === "object" && !Array.isArray(value)) {
    return { value: Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mark(v)])) };
  }
  return { value: mark(value) };
}
"""
# Start window[fn](...args) without waiting: with redirect: true the client navigates away.
START_JS = """
([fn, args]) => {
  window[fn](...args).catch((error) => console.error(`client threw: ${error}`));
}
"""


@pytest.fixture(scope="session")
def authjs_server(
    smtp_inbox: Inbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The app on a loopback port with e-mail (through ``smtp_inbox``) and the demo
    credentials, on its own SQLite database."""
    database_url = "sqlite:///" + str(tmp_path_factory.mktemp("authjs-db") / "test.sqlite3")
    migrate_database(database_url)

    def build(origin: str) -> Any:
        config = base_config(
            database_url,
            AUTH_URL=f"{origin}/auth",
            EMAIL_SERVER=f"smtp://127.0.0.1:{smtp_inbox.port}",
            EMAIL_TIMEOUT="5",
        )
        return create_app(config, environ={})

    with served(build) as (origin, app):
        yield LiveServer(origin, app, smtp_inbox)


@pytest.fixture(autouse=True)
def _fresh_database(authjs_server: LiveServer) -> Iterator[None]:
    """Replaces the browser conftest's fixture of this name (which would start the shared
    live servers): empty this module's server's tables after each test."""
    yield
    with authjs_server.app.app_context():
        empty_tables()


@pytest.fixture(scope="session")
def authjs_bundles(
    authjs_server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, str]]:
    """Build both clients with esbuild into a temporary folder; return what build.mjs
    prints: per client, its file, package name and version."""
    for folder in ("next-auth", "next-auth-v5"):
        if not (ROOT / "node_modules" / folder / "package.json").exists():
            pytest.fail(f"node_modules/{folder} is missing: run ./scripts/setup", pytrace=False)
    outdir = tmp_path_factory.mktemp("authjs-clients")
    done = subprocess.run(
        ["node", str(BUILD), str(outdir), f"{authjs_server.url}/auth"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"building the Auth.js clients failed:\n{done.stderr}", pytrace=False)
    built: dict[str, dict[str, str]] = json.loads(done.stdout)
    return built


@dataclass
class Client:
    """One Auth.js client loaded in a page of the app's origin, and what the page saw."""

    name: str
    version: str
    page: Any
    origin: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    log_reports: list[Any] = field(default_factory=list)

    @property
    def harness_url(self) -> str:
        return f"{self.origin}{HARNESS}/{self.name}"

    def call(self, fn: str, *args: Any) -> Any:
        """``await window[fn](...args)`` in the page; fail the test if the client threw."""
        outcome = self.page.evaluate(CALL_JS, [fn, list(args), UNDEFINED])
        assert "threw" not in outcome, f"{self.name} {fn}{args!r} threw {outcome['threw']}"
        return outcome["value"]

    def start(self, fn: str, *args: Any) -> None:
        """Call ``window[fn](...args)`` without waiting for it (it is to navigate away)."""
        self.page.evaluate(START_JS, [fn, list(args)])

    def promised(
        self,
        *,
        status: int,
        ok: bool,
        url: str | None,
        error: str | None = None,
        code: str | None = None,
    ) -> dict[str, Any]:
        """What ``signIn(…, {redirect: false})`` resolves to in this client's source."""
        if self.name == "v4":
            return {"error": error, "status": status, "ok": ok, "url": url}
        return {
            "error": error or UNDEFINED,
            "code": code or UNDEFINED,
            "status": status,
            "ok": ok,
            "url": url,
        }

    def answers(self, path: str) -> Any:
        """``page.expect_response`` for the client's POST to ``/auth/<path>``."""
        target = f"{self.origin}/auth/{path}"
        return self.page.expect_response(
            lambda r: r.request.method == "POST" and r.url.split("?")[0] == target
        )

    def serve_csrf(self, token: str) -> None:
        """From now on answer the client's ``GET /auth/csrf`` with ``token`` and no cookie,
        as a cache in front of the app would replay an old answer."""
        self.page.route(
            f"{self.origin}/auth/csrf",
            lambda route: route.fulfill(json={"csrfToken": token}),
        )

    def cookie(self, name: str) -> dict[str, Any] | None:
        found = [c for c in self.page.context.cookies() if c["name"] == name]
        return found[0] if found else None

    def sign_in_with_demo(self, email: str) -> None:
        result = self.call(
            "signIn", DEMO, {"email": email, "password": DEMO_PASSWORD, "redirect": False}
        )
        assert result == self.promised(status=200, ok=True, url=self.harness_url), result
        assert self.cookie(SESSION_COOKIE) is not None

    def session_email(self) -> str | None:
        """The signed-in address by the app's own answer (not through the client)."""
        body = self.page.request.get(f"{self.origin}/auth/session").json()
        return body["user"]["email"] if body else None


def _client_page(name: str, bundle: dict[str, str]) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{bundle['package']} {bundle['version']}</title>"
        f'<script src="{HARNESS}/{name}.js"></script></head>'
        f"<body><h1>{bundle['package']} {bundle['version']} ({name})</h1></body></html>"
    )


@pytest.fixture(params=CLIENTS)
def client(
    request: pytest.FixtureRequest,
    chromium: Any,
    authjs_server: LiveServer,
    authjs_bundles: dict[str, dict[str, str]],
) -> Iterator[Client]:
    """A fresh browser context (its own cookies) with one client's page open."""
    name = request.param
    bundle = authjs_bundles[name]
    origin = authjs_server.url
    context = chromium.new_context(base_url=origin)
    context.set_default_timeout(10_000)
    page = context.new_page()
    client = Client(name, bundle["version"], page, origin)

    def console(message: Any) -> None:
        # Chromium logs each non-2xx answer; the tests judge answers themselves.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            client.console_errors.append(message.text)

    def request_sent(sent: Any) -> None:
        if sent.url == f"{origin}/auth/_log":
            client.log_reports.append(sent)

    page.on("console", console)
    page.on("pageerror", lambda error: client.page_errors.append(str(error)))
    page.on("request", request_sent)
    page.route(
        f"{origin}{HARNESS}/{name}",
        lambda route: route.fulfill(content_type="text/html", body=_client_page(name, bundle)),
    )
    page.route(
        f"{origin}{HARNESS}/{name}.js",
        lambda route: route.fulfill(content_type="text/javascript", path=bundle["file"]),
    )
    page.goto(client.harness_url)
    loaded = page.evaluate("() => window.authjsClient")
    assert loaded["version"] == bundle["version"], loaded
    try:
        yield client
    finally:
        context.close()
    assert client.page_errors == [], f"uncaught in the page: {client.page_errors}"


# -- 1, 2: providers and the CSRF token ------------------------------------------------


def test_get_providers_returns_the_apps_providers(client: Client) -> None:
    served = client.page.request.get(f"{client.origin}/auth/providers").json()
    assert client.call("getProviders") == served
    # Not an empty answer that any client would echo: the providers this app configures.
    kinds = {p["id"]: p["type"] for p in served.values()}
    assert (kinds["email"], kinds[DEMO]) == ("email", "credentials"), kinds
    assert client.console_errors == []


def test_get_csrf_token_returns_a_token(client: Client) -> None:
    token = client.call("getCsrfToken")
    assert isinstance(token, str) and len(token) >= 20, token
    cookie = client.cookie(CSRF_COOKIE)
    assert cookie is not None and cookie["httpOnly"], cookie
    assert client.console_errors == []


# -- 3: the session, signed out ----------------------------------------------------------


def test_get_session_signed_out(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    """Signed out, the app answers ``200 null`` (as @auth/core does). v5 returns it. v4's
    fetchData expects an object (next-auth v4's server answers ``{}``): ``Object.keys(null)``
    throws inside it, so it logs CLIENT_FETCH_ERROR, reports it to ``POST /auth/_log`` with
    navigator.sendBeacon, and still resolves to null."""
    page, origin = client.page, client.origin
    caplog.set_level(logging.INFO, logger="webapp.client")
    if client.name == "v5":
        with page.expect_response(f"{origin}/auth/session") as answer:
            session = client.call("getSession")
        assert (answer.value.status, answer.value.json()) == (200, None)
        assert session is None
        client.call("getCsrfToken")  # one more round trip: a report would have been sent
        assert client.log_reports == []
        assert client.console_errors == []
        assert [r for r in caplog.records if r.name == "webapp.client"] == []
        return

    with (
        page.expect_request(f"{origin}/auth/_log") as beacon,
        page.expect_response(f"{origin}/auth/session") as answer,
    ):
        session = client.call("getSession")
    assert (answer.value.status, answer.value.json()) == (200, None)
    assert session is None
    assert len(client.console_errors) == 1
    assert client.console_errors[0].startswith("[next-auth][error][CLIENT_FETCH_ERROR]")
    report = beacon.value
    assert report.method == "POST"
    assert report.headers["content-type"].startswith("application/x-www-form-urlencoded")
    fields = {k: v[0] for k, v in parse_qs(report.post_data).items()}
    assert fields == {
        "level": "error",
        "code": "CLIENT_FETCH_ERROR",
        "error": "[object Object]",  # v4 puts the formatted error object in a form field
        "url": "/auth/session",
        "message": "Cannot convert undefined or null to object",
        "client": "true",
    }
    received = report.response()
    assert received is not None and received.status == 204
    # The app logged it before it answered.
    logged = [r for r in caplog.records if r.name == "webapp.client"]
    assert len(logged) == 1
    assert logged[0].levelno == logging.ERROR
    line = logged[0].getMessage()
    assert line.startswith('client report code="CLIENT_FETCH_ERROR" ')
    for part in (
        'url="/auth/session"',
        'message="Cannot convert undefined or null to object"',
        'client="true"',
    ):
        assert part in line, line


# -- 4: e-mail sign-in -------------------------------------------------------------------


def test_email_sign_in(client: Client, authjs_server: LiveServer) -> None:
    page, origin = client.page, client.origin
    address = f"erin-{client.name}@example.com"
    options = {"email": address, "redirect": False, "callbackUrl": f"{origin}/"}
    with client.answers("signin/email") as answer:
        result = client.call("signIn", "email", options)
    verify = f"{origin}/auth/verify-request?provider=email&type=email"
    assert (answer.value.status, answer.value.json()) == (200, {"url": verify})
    assert result == client.promised(status=200, ok=True, url=verify)

    link = link_of(authjs_server.inbox.last_to(address))
    page.goto(link)
    page.get_by_role("button", name=f"Sign in as {address}").click()
    # The link kept the callbackUrl the client sent. (Not the client's own page: page.route
    # does not see a redirect's next request, so the app would answer that path 404.)
    page.wait_for_url(f"{origin}/")
    expect(page.get_by_text("You are signed in as")).to_contain_text(address)
    page.goto(client.harness_url)
    session = client.call("getSession")
    assert sorted(session["user"]) == ["email", "image", "name"]
    assert session["user"]["email"] == address
    assert ISO_UTC.fullmatch(session["expires"]), session


# -- 5: credentials ----------------------------------------------------------------------


def test_credentials_right(client: Client) -> None:
    address = f"ann-{client.name}@example.com"
    form = {"email": address, "password": DEMO_PASSWORD, "redirect": False}
    with client.answers(f"callback/{DEMO}") as answer:
        result = client.call("signIn", DEMO, form)
    assert (answer.value.status, answer.value.json()) == (200, {"url": client.harness_url})
    assert result == client.promised(status=200, ok=True, url=client.harness_url)
    session = client.call("getSession")
    assert session["user"]["email"] == address
    assert client.console_errors == []


def test_credentials_wrong(client: Client) -> None:
    """v4's form says ``json=true``: the app answers with 401, as next-auth v4's server
    does, and the client reports ``ok: false, status: 401``. v5 sends only the header: the
    app answers 200, as @auth/core does, and the client reports the error and its code with
    ``ok: true, status: 200``. Both answers name the sign-in page with
    ``error=CredentialsSignin&code=credentials`` (and the page's ``callbackUrl``, kept for
    the browser that follows it)."""
    origin = client.origin
    form = {"email": f"bob-{client.name}@example.com", "password": "wrong", "redirect": False}
    with client.answers(f"callback/{DEMO}") as answer:
        result = client.call("signIn", DEMO, form)
    sent, posted = answer.value.request, parse_qs(answer.value.request.post_data)
    # Nobody is signed in, whatever the answer's shape.
    assert client.cookie(SESSION_COOKIE) is None
    assert client.session_email() is None
    # The client's promise first, then the app's answer it was made from.
    status, body = answer.value.status, answer.value.json()
    if client.name == "v4":
        assert posted["json"] == ["true"] and "x-auth-return-redirect" not in sent.headers
        assert result == client.promised(status=401, ok=False, url=None, error="CredentialsSignin")
        assert status == 401, body
    else:
        assert sent.headers["x-auth-return-redirect"] == "1" and "json" not in posted
        assert result == client.promised(
            status=200, ok=True, url=None, error="CredentialsSignin", code="credentials"
        )
        assert status == 200, body
    assert list(body) == ["url"]
    parts = urlsplit(body["url"])
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{origin}/auth/signin"
    query = parse_qs(parts.query)
    assert (query["error"], query["code"]) == (["CredentialsSignin"], ["credentials"]), body
    assert set(query) <= {"error", "code", "callbackUrl"}, body


# -- 6: signing out ----------------------------------------------------------------------


def test_sign_out(client: Client) -> None:
    client.sign_in_with_demo(f"cy-{client.name}@example.com")
    with client.answers("signout") as answer:
        result = client.call("signOut", {"redirect": False})
    assert (answer.value.status, answer.value.json()) == (200, {"url": client.harness_url})
    assert result == {"url": client.harness_url}
    assert client.cookie(SESSION_COOKIE) is None
    assert client.call("getSession") is None


# -- 7: a stale or dropped CSRF cookie, a wrong token ------------------------------------


@pytest.mark.parametrize("redirect", [False, True], ids=["redirect-false", "redirect-true"])
def test_stale_csrf_token_on_sign_in(client: Client, redirect: bool) -> None:
    """The client got a token; then the browser drops the CSRF cookie, and ``/auth/csrf``
    is answered from a cache (the old token, no new cookie). The app must refuse with
    MissingCSRF in the client's terms, 200 ``{"url": "…/signin?error=MissingCSRF"}`` (as
    @auth/core 0.41 does), and the client must say so rather than throw."""
    page, origin = client.page, client.origin
    token = client.call("getCsrfToken")
    page.context.clear_cookies(name=CSRF_COOKIE)
    client.serve_csrf(token)
    landing = f"{origin}/auth/signin?error=MissingCSRF"
    form = {"email": f"dee-{client.name}@example.com", "password": DEMO_PASSWORD}
    if redirect:
        _lands_on_missing_csrf(client, landing, lambda: client.start("signIn", DEMO, form))
    else:
        with client.answers(f"callback/{DEMO}") as answer:
            result = client.call("signIn", DEMO, {**form, "redirect": False})
        assert (answer.value.status, answer.value.json()) == (200, {"url": landing})
        assert result == client.promised(status=200, ok=True, url=None, error="MissingCSRF")
    assert client.cookie(SESSION_COOKIE) is None
    assert client.session_email() is None


@pytest.mark.parametrize("redirect", [False, True], ids=["redirect-false", "redirect-true"])
def test_wrong_csrf_token_on_sign_out(client: Client, chromium: Any, redirect: bool) -> None:
    """A signed-in browser whose client is handed another browser's (valid) token: the app
    must refuse the sign-out with MissingCSRF in the client's terms and keep the session."""
    origin = client.origin
    address = f"eve-{client.name}@example.com"
    client.sign_in_with_demo(address)
    other = chromium.new_context()
    try:
        foreign = other.request.get(f"{origin}/auth/csrf").json()["csrfToken"]
    finally:
        other.close()
    client.serve_csrf(foreign)
    landing = f"{origin}/auth/signin?error=MissingCSRF"
    if redirect:
        _lands_on_missing_csrf(client, landing, lambda: client.start("signOut"))
    else:
        with client.answers("signout") as answer:
            result = client.call("signOut", {"redirect": False})
        assert (answer.value.status, answer.value.json()) == (200, {"url": landing})
        assert result == {"url": landing}
    assert client.cookie(SESSION_COOKIE) is not None
    assert client.session_email() == address


def _lands_on_missing_csrf(client: Client, landing: str, act: Any) -> None:
    """``act()`` starts a call with ``redirect: true``: the browser must land on the
    sign-in page showing the MissingCSRF message."""
    page = client.page
    with page.expect_navigation(timeout=5_000):
        act()
    assert page.url == landing
    expect(page.get_by_role("alert")).to_contain_text("Your form expired")
    assert not [e for e in client.console_errors if e.startswith("client threw")]
