"""Drive a whole sign-in flow under load and report complete flows per second.

``--flow email`` (the default): each worker thread acts as a stream of new browsers: csrf
token, ``POST signin/email``, the link from the mail sink's folder (``bench/mailsink.py``),
``GET`` on the link (the confirmation page), ``POST`` of its form, then ``GET session``,
which must name the address.

``--flow oauth``: csrf token, ``POST signin/op``, the OpenID Provider's redirects (a real
oidc-provider, ``tests/op/server.mjs``, started here on the issuer of bench/providers.toml;
its only test-only part is that the authorization request's login_hint logs the account in
and consent is given at once), the callback (code exchange, ID token and JWKS check, user
info), then ``GET session``. Its accounts are ``OP_ACCOUNTS`` people taken in turn, so after
the first round each flow signs in a returning user.

Every step's status and body are checked; a flow counts only when all pass.

    python -m bench.flow --base http://127.0.0.1:8100/auth --mail /tmp/bench-mail \
        --threads 4 --seconds 10
    python -m bench.flow --flow oauth --base http://127.0.0.1:8100/auth --threads 4
"""

from __future__ import annotations

import argparse
import html
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urljoin, urlsplit

from joserfc.jwk import RSAKey

ROOT = Path(__file__).resolve().parent.parent
#: People the OpenID Provider knows (``op0`` … ), signed in in turn.
OP_ACCOUNTS = 200

CSRF_FIELD_RE = re.compile(r'name="csrfToken" value="([^"]+)"')


class Browser:
    """A keep-alive connection per site and one cookie jar (the app and the provider share
    the host 127.0.0.1, and cookies do not tell ports apart, as in a real browser): just
    enough of a browser for the flows."""

    def __init__(self) -> None:
        self.conns: dict[str, http.client.HTTPConnection] = {}
        self.cookies: dict[str, str] = {}
        #: The last answer's Location header, if any.
        self.location: str | None = None

    def request(self, method: str, url: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        parts = urlsplit(url)
        conn = self.conns.get(parts.netloc)
        if conn is None:
            host = parts.hostname or "127.0.0.1"
            conn = self.conns[parts.netloc] = http.client.HTTPConnection(
                host, parts.port, timeout=30
            )
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        location = response.headers.get("Location")
        self.location = urljoin(url, location) if location else None
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            value = rest.split(";", 1)[0]
            if value and "Max-Age=0" not in header:
                self.cookies[name] = value
            else:
                self.cookies.pop(name, None)
        return response.status, text


@dataclass
class Tally:
    """Results shared by the worker threads."""

    durations: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, step: str) -> None:
        with self.lock:
            self.failures[step] = self.failures.get(step, 0) + 1


def email_flow(browser: Browser, base: str, mail: Path, n: str) -> str | None:
    """Sign a new address (``n`` makes it unique) in by e-mail; return the failing step's
    name, or None."""
    address = f"flow-{n}@bench.example"
    browser.cookies.clear()
    status, text = browser.request("GET", f"{base}/csrf")
    if status != 200:
        return "csrf"
    token = json.loads(text)["csrfToken"]
    status, text = browser.request(
        "POST", f"{base}/signin/email", {"email": address, "csrfToken": token, "json": "true"}
    )
    if status != 200 or "verify-request" not in text:
        return "signin"
    link_file = mail / address
    deadline = time.monotonic() + 5
    while not link_file.exists():
        if time.monotonic() > deadline:
            return "mail"
        time.sleep(0.002)
    link = link_file.read_text()
    link_file.unlink()
    status, text = browser.request("GET", link)
    match = CSRF_FIELD_RE.search(text)
    if status != 200 or match is None or address not in text:
        return "link"
    query = dict(p.split("=", 1) for p in urlsplit(link).query.split("&"))
    form = {"csrfToken": html.unescape(match.group(1)), "token": query["token"], "email": address}
    status, _ = browser.request("POST", f"{base}/callback/email", form)
    if status != 302:
        return "confirm"
    status, text = browser.request("GET", f"{base}/session")
    if status != 200 or f'"email":"{address}"' not in text:
        return "session"
    return None


def oauth_flow(browser: Browser, base: str, account: int) -> str | None:
    """Sign OpenID Provider account ``op<account>`` in; return the failing step's name, or
    None."""
    browser.cookies.clear()
    status, text = browser.request("GET", f"{base}/csrf")
    if status != 200:
        return "csrf"
    token = json.loads(text)["csrfToken"]
    origin = base.rsplit("/", 1)[0]
    status, _ = browser.request(
        "POST",
        f"{base}/signin/op?login_hint=op{account}",
        {"csrfToken": token, "callbackUrl": origin},
    )
    if status != 302 or browser.location is None:
        return "signin"
    url = browser.location
    for _ in range(10):  # the provider's redirects: authorize, login, consent, back to us
        if url.startswith(f"{base}/callback/"):
            break
        status, _ = browser.request("GET", url)
        if status not in (302, 303) or browser.location is None:
            return "provider"
        url = browser.location
    else:
        return "provider"
    status, _ = browser.request("GET", url)
    if status != 302 or "auth.session-token" not in browser.cookies:
        return "callback"
    status, text = browser.request("GET", f"{base}/session")
    if status != 200 or f'"email":"op{account}@op.bench.example"' not in text:
        return "session"
    return None


@contextmanager
def openid_provider() -> Iterator[None]:
    """Run the OpenID Provider of bench/providers.toml's ``op`` on its issuer, for the app
    at ``AUTH_URL``'s origin (the client's redirect URI), until the block ends."""
    conf = tomllib.loads((ROOT / "bench/providers.toml").read_text())
    [op] = [p for p in conf["providers"] if p["id"] == "op"]
    app_origin = os.environ.get("AUTH_URL", "http://127.0.0.1:8100/auth").rsplit("/", 1)[0]
    key = RSAKey.generate_key(2048, parameters={"kid": "bench-op", "use": "sig"})
    config = {
        "port": urlsplit(op["issuer"]).port,
        "clients": [
            {
                "client_id": op["client_id"],
                "client_secret": op["client_secret"],
                "redirect_uris": [f"{app_origin}/auth/callback/op"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }
        ],
        "accounts": {
            f"op{i}": {
                "email": f"op{i}@op.bench.example",
                "email_verified": True,
                "name": f"Op {i}",
            }
            for i in range(OP_ACCOUNTS)
        },
        "jwks": {"keys": [key.as_dict(private=True)]},
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "op.json"
        path.write_text(json.dumps(config))
        process = subprocess.Popen(
            ["node", str(ROOT / "tests/op/server.mjs"), str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            if not process.stdout.readline().startswith("ready "):
                raise SystemExit(f"oidc-provider did not start (exit code {process.poll()})")
            yield
        finally:
            process.terminate()
            process.wait(timeout=10)


def run(
    flow: Callable[[Browser, int, int], str | None], threads: int, seconds: float
) -> dict[str, object]:
    """Run ``flow(browser, thread, n)`` from ``threads`` threads for ``seconds``; return the
    figures."""
    tally = Tally()
    stop_at = time.monotonic() + seconds

    def worker(index: int) -> None:
        browser = Browser()
        n = 0
        while time.monotonic() < stop_at:
            started = time.monotonic()
            try:
                failed = flow(browser, index, n)
            except (OSError, http.client.HTTPException):
                failed = "connection"
                browser = Browser()  # a dropped connection is not reused
            n += 1
            if failed:
                tally.fail(failed)
            else:
                with tally.lock:
                    tally.durations.append(time.monotonic() - started)

    started = time.monotonic()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - started
    done = sorted(tally.durations)

    def pct(p: float) -> float:
        return done[min(len(done) - 1, int(p * len(done)))] * 1000 if done else float("nan")

    return {
        "flows": len(done),
        "flows_per_s": len(done) / elapsed,
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "mean_ms": statistics.fmean(done) * 1000 if done else float("nan"),
        "failures": tally.failures,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.flow", description=__doc__)
    parser.add_argument("--flow", choices=("email", "oauth"), default="email")
    parser.add_argument("--base", required=True, help="the auth base URL")
    parser.add_argument("--mail", type=Path, help="the mail sink's folder (--flow email)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args(argv)
    base = args.base
    if args.flow == "email":
        if args.mail is None:
            parser.error("--flow email needs --mail")
        stamp = int(time.time())
        result = run(
            lambda b, i, n: email_flow(b, base, args.mail, f"{stamp}-{i}-{n}"),
            args.threads,
            args.seconds,
        )
    else:
        with openid_provider():
            result = run(
                lambda b, i, n: oauth_flow(b, base, (n * args.threads + i) % OP_ACCOUNTS),
                args.threads,
                args.seconds,
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
