"""The production server set-up: gunicorn with the repository's gunicorn.conf.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from .conftest import TEST_SECRET, migrate_database

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gunicorn_serves_the_app_and_logs_each_request_in_the_documented_format(tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    migrate_database(url)
    port = _free_port()
    log = tmp_path / "access.log"
    env = {**os.environ, "APP_ENV": "production", "AUTH_SECRET": TEST_SECRET,
           "AUTH_URL": f"http://127.0.0.1:{port}/auth", "DATABASE_URL": url,
           "WEB_CONCURRENCY": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py",
         "--bind", f"127.0.0.1:{port}", "--access-logfile", str(log)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                r = requests.get(f"http://127.0.0.1:{port}/auth/session", timeout=5,
                                 headers={"User-Agent": 'probe "quoted" 1.0'})
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        else:
            raise AssertionError("gunicorn did not start")
        assert r.status_code == 200 and r.json() is None
        rid = r.headers["X-Request-ID"]
        for _ in range(50):  # the worker writes the line after sending the response
            if rid in log.read_text():
                break
            time.sleep(0.1)
        [line] = [x for x in log.read_text().splitlines() if rid in x]
        assert line.startswith('127.0.0.1 "GET /auth/session HTTP/1.1" 200 5 ')
        assert line.endswith(f'ms rid={rid} "probe \\"quoted\\" 1.0"')
    finally:
        server.terminate()
        server.wait(timeout=30)
