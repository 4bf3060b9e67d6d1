"""The production server set-up: gunicorn with the repository's gunicorn.conf.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from .helpers import run_gunicorn


@contextmanager
def _gunicorn(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """Run gunicorn with the repository's config; yield its URL, access and error logs."""
    with run_gunicorn(tmp_path) as server:
        yield server.url, server.access_log, server.error_log


def _line_with(log: Path, text: str) -> str:
    """The one line of ``log`` containing ``text`` (the worker writes it after answering)."""
    for _ in range(50):
        if text in log.read_text():
            break
        time.sleep(0.1)
    [line] = [x for x in log.read_text().splitlines() if text in x]
    return line


def test_gunicorn_serves_the_app_and_logs_each_request_in_the_documented_format(tmp_path):
    with _gunicorn(tmp_path) as (base, log, _):
        r = requests.get(
            f"{base}/auth/session", timeout=5, headers={"User-Agent": 'probe "quoted" 1.0'}
        )
        assert r.status_code == 200 and r.json() is None
        rid = r.headers["X-Request-ID"]
        line = _line_with(log, rid)
        assert line.startswith('127.0.0.1 "GET /auth/session HTTP/1.1" 200 5 ')
        assert line.endswith(f'ms rid={rid} "probe \\"quoted\\" 1.0"')


def test_gunicorn_logs_no_link_token_and_no_forged_line(tmp_path):
    with _gunicorn(tmp_path) as (base, log, errors):
        link = f"{base}/auth/callback/email?token=SECRETTOKEN1&email=ann%40example.com"
        r = requests.get(link, allow_redirects=False, timeout=5)
        line = _line_with(log, r.headers["X-Request-ID"])
        assert ' "GET /auth/callback/email?token=[redacted]&email=ann%40example.com HTTP/1.1" ' in (
            line
        )
        # gunicorn refuses controls in headers but passes bytes 0x80-0xFF: 0x85 is NEL.
        r = requests.get(
            f"{base}/auth/csrf", timeout=5, headers={"User-Agent": "probe\x85FORGED line"}
        )
        line = _line_with(log, r.headers["X-Request-ID"])
        assert line.endswith('"probe\\x85FORGED line"')
        # A malformed request line is reported, raw, in the error log.
        with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:
            sock.sendall(
                b"GET /auth/callback/email?token=SECRETTOKEN2\x85 HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            assert sock.recv(1024).startswith(b"HTTP/1.1 400")
        bad = _line_with(errors, "Invalid request")
        assert "token=[redacted]" in bad
    text = log.read_text(encoding="utf-8") + errors.read_text(encoding="utf-8")
    assert "SECRETTOKEN" not in text and "\x85" not in text
    assert all("FORGED" not in x or x.startswith("127.0.0.1") for x in text.splitlines())


def test_gunicorn_sends_static_files_itself_and_logs_their_request_id(tmp_path):
    """The request id layer hands a file answer to gunicorn as gunicorn's own file wrapper
    (so it can use sendfile) and the access line still carries the id."""
    favicon = Path(__file__).resolve().parent.parent / "webapp" / "static" / "favicon.svg"
    with _gunicorn(tmp_path) as (base, log, _):
        r = requests.get(f"{base}/static/favicon.svg", timeout=5)
        assert r.status_code == 200 and r.content == favicon.read_bytes()
        line = _line_with(log, r.headers["X-Request-ID"])
        # (The byte count reads 0: gunicorn counts no bytes it sends with sendfile.)
        assert line.startswith('127.0.0.1 "GET /static/favicon.svg HTTP/1.1" 200 ')
        assert line.endswith(
            f'ms rid={r.headers["X-Request-ID"]} "python-requests/{requests.__version__}"'
        )
