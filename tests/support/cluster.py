"""The local cluster for tests/test_cluster.py: ``scripts/cluster`` run in a directory, on
ports and a database of the test session's own, and what the tests do to it.

``Cluster`` starts it and reaches each piece (the balancer, each instance directly,
PgBouncer, PostgreSQL itself, HAProxy's admin socket, the logs); ``Browser`` is one person
signing in by e-mail through any of them; ``Load`` keeps requests going through the
balancer while a test breaks or restarts something, and keeps every answer.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from webapp.web.error_answers import RETRY_AFTER

from .mail import Mailbox, link_of
from .rows import read_rows

ROOT = Path(__file__).resolve().parents[2]
#: The password the credentials hook of the served app (tests/support/cluster_app.py)
#: accepts.
PASSWORD = "correct horse battery staple"
#: ``scripts/cluster``'s exit status when pgbouncer or haproxy is missing and cannot be
#: installed.
MISSING_PACKAGES = 3
INSTANCES = ("app1", "app2")
FORM_FIELD = re.compile(r'name="(\w+)" value="([^"]*)"')


@dataclass
class Cluster:
    """A cluster started by ``scripts/cluster up`` in ``folder`` with ``env``."""

    folder: Path
    env: dict[str, str]
    #: The balancer: the site (AUTH_URL is ``{url}/auth``).
    url: str
    #: Each instance, reached directly.
    instances: dict[str, str]
    #: PostgreSQL itself and PgBouncer, as SQLAlchemy URLs.
    database: str
    pooled: str

    def command(self, action: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``scripts/cluster ACTION``; fail with its output if it fails."""
        done = subprocess.run(
            [str(ROOT / "scripts" / "cluster"), action],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"scripts/cluster {action} exited with {done.returncode}:\n{done.stderr}\n"
                + "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.logs())
            )
        return done

    def logs(self) -> list[Path]:
        return sorted(self.folder.glob("*.log"))

    def log(self, piece: str) -> str:
        """An instance's output (``app1``), or ``haproxy``'s (its request log)."""
        return (self.folder / f"{piece}.log").read_text()

    def pid(self, piece: str) -> int:
        """The pid of ``app1``, ``app2``, ``haproxy`` or ``pgbouncer``."""
        return int((self.folder / f"{piece}.pid").read_text())

    def kill(self, piece: str) -> None:
        """SIGKILL a piece with everything it started: an instance's server and workers
        (a session of their own, scripts/cluster), or PgBouncer."""
        pid = self.pid(piece)
        if piece in INSTANCES:
            assert os.getpgid(pid) == pid, "an instance runs in a process group of its own"
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not _alive(pid), within=10, what=f"{piece} to die")

    def haproxy(self, command: str) -> str:
        """A command on HAProxy's admin socket, and its answer."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.folder / "haproxy.sock"))
            sock.sendall(command.encode() + b"\n")
            return sock.makefile(encoding="utf-8").read()

    def status(self, server: str, backend: str = "webapp") -> str:
        """HAProxy's view of an instance: UP, DOWN, DRAIN, MAINT…"""
        for line in self.haproxy("show stat").splitlines():
            cells = line.split(",")
            if cells[:2] == [backend, server]:
                return cells[17]
        raise AssertionError(f"HAProxy has no server {backend}/{server}")

    def rows(self, sql: str, **params: Any) -> list[Any]:
        """Rows read from PostgreSQL directly."""
        return read_rows(self.database, sql, **params)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition: Callable[[], bool], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within:g}s for {what}")
        time.sleep(0.1)


def on(origin: str, url: str) -> str:
    """``url`` (a link the app built on the balancer's origin) at another origin."""
    parts = urlsplit(url)
    return f"{origin}{parts.path}" + (f"?{parts.query}" if parts.query else "")


@dataclass
class Browser:
    """One person's browser. Cookies belong to a host name, not a port, as in browsers:
    the balancer's cookies go to each instance too (all are 127.0.0.1)."""

    http: requests.Session = field(default_factory=requests.Session)

    def csrf(self, origin: str) -> str:
        return str(self.http.get(f"{origin}/auth/csrf", timeout=10).json()["csrfToken"])

    def post(self, origin: str, path: str, form: dict[str, str], **kwargs: Any) -> Any:
        data = {"csrfToken": self.csrf(origin), **form}
        return self.http.post(
            f"{origin}{path}", data=data, allow_redirects=False, timeout=30, **kwargs
        )

    def request_link(self, origin: str, address: str, **kwargs: Any) -> Any:
        """POST signin/email; the answer is the redirect to verify-request (sent or not)."""
        answer = self.post(origin, "/auth/signin/email", {"email": address}, **kwargs)
        assert answer.status_code == 302, answer.status_code
        return answer

    def open_link(self, origin: str, link: str) -> dict[str, str]:
        """GET the link's confirmation page; return its form."""
        page = self.http.get(on(origin, link), timeout=10)
        assert page.status_code == 200, page.status_code
        return dict(FORM_FIELD.findall(page.text))

    def confirm(self, origin: str, link: str, form: dict[str, str]) -> Any:
        """Press the confirmation page's button."""
        url = on(origin, urlsplit(link).path)
        return self.http.post(url, data=form, allow_redirects=False, timeout=30)

    def sign_in(self, cluster: Cluster, mailbox: Mailbox, address: str) -> str:
        """Sign in by e-mail through the balancer; return the session cookie's value."""
        self.request_link(cluster.url, address)
        link = link_of(mailbox.last())
        assert self.confirm(cluster.url, link, self.open_link(cluster.url, link)).status_code == 302
        return self.cookie()

    def cookie(self) -> str:
        return str(self.http.cookies.get("auth.session-token"))

    def session_email(self, origin: str, cookie: str | None = None) -> str | None:
        """Who ``GET session`` at ``origin`` says is signed in (with ``cookie`` alone, if
        given, instead of the browser's cookies)."""
        if cookie is None:
            body = self.http.get(f"{origin}/auth/session", timeout=10).json()
        else:
            headers = {"Cookie": f"auth.session-token={cookie}"}
            body = requests.get(f"{origin}/auth/session", headers=headers, timeout=10).json()
        return body["user"]["email"] if body else None


@dataclass
class Answer:
    kind: str
    status: int | None
    body: str = ""
    #: requests' headers (case-insensitive: granian sends lower-case names).
    headers: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None

    def describe(self) -> str:
        return f"{self.kind}: {self.error or self.status} {self.body[:120]!r}"

    def is_clear_503(self) -> bool:
        """The app's own 503 (never the balancer's): Retry-After, its JSON and request id."""
        if self.status != 503 or self.headers.get("Retry-After") != str(RETRY_AFTER):
            return False
        rid = self.headers.get("X-Request-ID")
        try:
            body = json.loads(self.body)
        except ValueError:
            return False
        return bool(rid) and body == {"error": "ServiceUnavailable", "requestId": rid}


class Load:
    """Threads sending requests through the balancer until stopped; every answer kept.

    Kinds: ``session`` (a signed-in ``GET session``: 200 naming ``email``), ``csrf`` (200
    with a token) and ``signout`` (a signed-out ``POST signout`` with its CSRF token: 302),
    so reads, a database-free route and a form POST all go through whatever happens.
    """

    def __init__(self, base: str, cookie: str, email: str, kinds: tuple[str, ...]) -> None:
        self.base, self.cookie, self.email = base, cookie, email
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(k,)) for k in kinds]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def _loop(self, kind: str) -> None:
        browser = Browser()
        while not self._stop.is_set():
            self.answers.append(self._call(browser, kind))

    def _call(self, browser: Browser, kind: str) -> Answer:
        try:
            if kind == "session":
                headers = {"Cookie": f"auth.session-token={self.cookie}"}
                r = browser.http.get(f"{self.base}/auth/session", headers=headers, timeout=30)
            elif kind == "csrf":
                r = browser.http.get(f"{self.base}/auth/csrf", timeout=30)
            else:
                r = browser.post(self.base, "/auth/signout", {})
        except (requests.RequestException, ValueError, KeyError) as exc:
            return Answer(kind, None, error=f"{type(exc).__name__}: {exc}")
        return Answer(kind, r.status_code, r.text, r.headers)

    def ok(self, answer: Answer) -> bool:
        if answer.kind == "session":
            return answer.status == 200 and f'"email":"{self.email}"' in answer.body
        if answer.kind == "csrf":
            return answer.status == 200 and '"csrfToken"' in answer.body
        return answer.status == 302

    def failures(self) -> list[Answer]:
        return [a for a in list(self.answers) if not self.ok(a)]

    def successes(self) -> int:
        return sum(self.ok(a) for a in list(self.answers))

    def summary(self) -> str:
        counts = Counter(
            f"{a.kind} {'ok' if self.ok(a) else a.error or a.status}" for a in self.answers
        )
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
