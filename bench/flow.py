"""Drive the whole e-mail sign-in flow under load and report complete flows per second.

Each worker thread acts as a stream of new browsers: csrf token, ``POST signin/email``,
the link from the mail sink's folder (``bench/mailsink.py``), ``GET`` on the link (the
confirmation page), ``POST`` of its form, then ``GET session``, which must name the
address. Every step's status and body are checked; a flow counts only when all pass.

    python -m bench.flow --base http://127.0.0.1:8100/auth --mail /tmp/bench-mail \
        --threads 4 --seconds 10
"""

from __future__ import annotations

import argparse
import html
import http.client
import json
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

CSRF_FIELD_RE = re.compile(r'name="csrfToken" value="([^"]+)"')


class Browser:
    """One keep-alive connection and a cookie jar: just enough of a browser for the flow."""

    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        host = parts.hostname or "127.0.0.1"
        self.conn = http.client.HTTPConnection(host, parts.port, timeout=30)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, url: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        text = response.read().decode()
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


def one_flow(browser: Browser, base: str, mail: Path, address: str) -> str | None:
    """Sign ``address`` in by e-mail; return the failing step's name, or None."""
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


def run(base: str, mail: Path, threads: int, seconds: float) -> dict[str, object]:
    """Run flows from ``threads`` threads for ``seconds``; return the figures."""
    tally = Tally()
    stop_at = time.monotonic() + seconds
    stamp = int(time.time())

    def worker(index: int) -> None:
        browser = Browser(base)
        n = 0
        while time.monotonic() < stop_at:
            address = f"flow-{stamp}-{index}-{n}@bench.example"
            n += 1
            started = time.monotonic()
            failed = one_flow(browser, base, mail, address)
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
    parser.add_argument("--base", required=True, help="the auth base URL")
    parser.add_argument("--mail", type=Path, required=True, help="the mail sink's folder")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.base, args.mail, args.threads, args.seconds)))


if __name__ == "__main__":
    main()
