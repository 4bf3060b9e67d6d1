"""Servers in processes of their own: ``free_port`` finds a loopback port nobody listens
on, ``run_server`` runs the production server (deploy/serve.py) on one and stops it
afterwards, ``wait_until_listening`` waits for a server to answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from .config import TEST_SECRET
from .databases import migrate_database

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago (nothing listens on it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """The production server (deploy/serve.py) serving the app: where it listens, and its
    logs (``access_log``: its stdout, the access lines and granian's own; ``error_log``:
    its stderr, the app's log), and its process."""

    url: str
    port: int
    access_log: Path
    error_log: Path
    process: subprocess.Popen[bytes]


@contextmanager
def run_server(tmp_path: Path, *, database: str | None = None, **settings: str) -> Iterator[Server]:
    """Run the production server (scripts/serve: granian with deploy/serve.py) with one
    worker, production settings, a fresh migrated SQLite database and ``settings`` on top;
    stop it afterwards.

    ``database``: the URL of a database migrated already (e.g. the ``database_url``
    fixture's), used as it is instead of the fresh one: several servers given the same
    URL share it, as an application's instances do."""
    if database is None:
        database = f"sqlite:///{tmp_path / 'server.sqlite3'}"
        migrate_database(database)
    port = free_port()
    tmp_path.mkdir(parents=True, exist_ok=True)
    access, errors = tmp_path / "server-out.log", tmp_path / "server-err.log"
    env = {
        **os.environ,
        "APP_ENV": "production",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": f"http://127.0.0.1:{port}/auth",
        "DATABASE_URL": database,
        # A sign-in method, which production needs (nothing here sends mail).
        "EMAIL_SERVER": "smtp://127.0.0.1:2525",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        **settings,
    }
    with access.open("ab") as out, errors.open("ab") as err:
        server = subprocess.Popen(
            [sys.executable, "deploy/serve.py"], cwd=ROOT, env=env, stdout=out, stderr=err
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_listening(f"{url}/auth/csrf", server)
        yield Server(url, port, access, errors, server)
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def wait_until_listening(url: str, process: subprocess.Popen[Any]) -> None:
    """Wait until ``url`` answers at all (any status); fail if ``process`` exits first."""
    for _ in range(150):
        if process.poll() is not None:
            raise AssertionError(f"{process.args[0]} exited with {process.returncode}")
        try:
            requests.get(url, timeout=2)
            return
        except (requests.ConnectionError, requests.Timeout):
            # Not listening yet, or a worker still starting (under load, past the timeout).
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


def stop_process(process: subprocess.Popen[Any] | None) -> None:
    """Stop a server the tests started: SIGTERM, then SIGKILL after 10 s; close its
    captured output."""
    if process is None:
        return
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
