"""A first run of the development server, as a new user meets it (issue 14).

``./scripts/dev`` and ``flask run`` are started as processes: whichever way the port is
given, every link and redirect names it; the other loopback name is sent to the site's
own; start-up says nothing of Alembic but the migrations it applies, one line each; the
server's request lines carry the request id. Also: the tests' identity provider says
nothing of a client that went away, and only of that.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask

from .support.config import TEST_SECRET
from .support.oauth import fake_idp
from .support.servers import free_port
from .support.signin import DEMO_EMAIL, DEMO_PASSWORD

ROOT = Path(__file__).resolve().parent.parent
FLASK = [sys.executable, "-m", "flask"]
MIGRATIONS = sorted((ROOT / "migrations" / "versions").glob("0*.py"))
#: Settings a developer's shell may hold that would change what a first run does.
CONFIGURATION = re.compile(r"^(AUTH_|EMAIL_|FLASK_|WERKZEUG_|DB_)|^(APP_ENV|PORT|DATABASE_URL)$")


def _environment(tmp_path: Path, **settings: str) -> dict[str, str]:
    """A first run's environment: nothing configured but a secret (so no file is written
    in the repository's instance/), a fresh SQLite database and an outbox in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not CONFIGURATION.search(k)}
    return env | {
        "AUTH_SECRET": TEST_SECRET,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'dev.sqlite3'}",
        "EMAIL_OUTBOX": str(tmp_path / "outbox"),
        "PYTHONUNBUFFERED": "1",
        **settings,
    }


class Server:
    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://localhost:{port}"
        self.log = log

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def _serving(command: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[Server]:
    """Run ``command`` (a development server on ``port``) until the block ends."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    server = Server(port, log)
    try:
        # scripts/dev runs scripts/setup first, which may install packages.
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, f"exited with {process.returncode}:\n{server.output()}"
            try:
                requests.get(f"http://127.0.0.1:{port}/", timeout=2, allow_redirects=False)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)


def _request_lines(output: str, request_id: str) -> list[str]:
    return [line for line in output.splitlines() if f"[{request_id}] werkzeug: " in line]


# -- the port, however it is given -----------------------------------------------------

WAYS = {
    "scripts/dev --port": (["./scripts/dev", "--port", "{port}"], {}),
    "scripts/dev PORT=": (["./scripts/dev"], {"PORT": "{port}"}),
    "flask run -p": ([*FLASK, "--app", "app", "run", "-p", "{port}"], {"APP_ENV": "development"}),
    "flask run FLASK_RUN_PORT=": (
        [*FLASK, "--app", "app", "run"],
        {"APP_ENV": "development", "FLASK_RUN_PORT": "{port}"},
    ),
    "flask --app webapp run --port=": (
        [*FLASK, "--app", "webapp", "run", "--port={port}"],
        {"APP_ENV": "development"},
    ),
}


@pytest.mark.parametrize("way", WAYS)
def test_a_new_user_signs_in_on_the_port_served(tmp_path: Path, way: str) -> None:
    port = free_port()
    command, settings = WAYS[way]
    env = _environment(tmp_path, **{k: v.format(port=port) for k, v in settings.items()})
    with _serving([c.format(port=port) for c in command], env, port, tmp_path / "log") as server:
        # The address the server prints (127.0.0.1) leads to the site's own name, same
        # path and query: passkeys need a domain name, and cookies belong to one name.
        printed = f"http://127.0.0.1:{port}/auth/signin?callbackUrl=%2Fafter"
        moved = requests.get(printed, allow_redirects=False, timeout=10)
        assert (moved.status_code, moved.headers["Location"]) == (
            307,
            f"{server.url}/auth/signin?callbackUrl=%2Fafter",
        )
        browser = requests.Session()
        page = browser.get(printed, timeout=10)
        assert page.status_code == 200 and page.url == moved.headers["Location"]
        assert 'action="/auth/callback/demo"' in page.text
        token = browser.get(f"{server.url}/auth/csrf", timeout=10).json()["csrfToken"]
        signed_in = browser.post(
            f"{server.url}/auth/callback/demo",
            data={"csrfToken": token, "email": DEMO_EMAIL, "password": DEMO_PASSWORD},
            allow_redirects=False,
            timeout=10,
        )
        assert (signed_in.status_code, signed_in.headers["Location"]) == (302, f"{server.url}/")
        session = browser.get(f"{server.url}/auth/session", timeout=10)
        assert session.json()["user"]["email"] == DEMO_EMAIL
    output = server.output()
    assert f"serving {server.url}/auth;" in output
    # The server's own request lines carry the id the answer echoes, redirects included.
    for answer in (moved, signed_in, session):
        [line] = _request_lines(output, answer.headers["X-Request-ID"])
        assert f" {answer.status_code} " in line


def test_start_up_names_each_migration_it_applies_and_nothing_else_of_alembic(
    tmp_path: Path,
) -> None:
    env = _environment(tmp_path, APP_ENV="development")
    port = free_port()
    command = [*FLASK, "--app", "app", "run", "--port", str(port)]
    with _serving(command, env, port, tmp_path / "first.log") as first:
        pass
    alembic = [line for line in first.output().splitlines() if "alembic" in line]
    assert len(alembic) == len(MIGRATIONS) > 0, alembic
    for line, migration in zip(alembic, MIGRATIONS, strict=True):
        revision = migration.stem
        assert re.fullmatch(
            rf"\S+ \S+ INFO \[-\] alembic\.runtime\.migration: Running upgrade (\S+ )?-> "
            rf"{revision}, \S.*\S",
            line,
        ), line
    with _serving(command, env, port, tmp_path / "again.log") as again:
        pass
    assert "alembic" not in again.output()


def test_flask_run_on_port_0_stops_with_one_line_naming_the_problem(tmp_path: Path) -> None:
    env = _environment(tmp_path, APP_ENV="development")
    run = subprocess.run(
        [*FLASK, "--app", "app", "run", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "Error: flask run --port 0 picks its port after the app has started" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_request_id_stays_current_until_the_answer_is_closed(
    app: Flask, caplog: pytest.LogCaptureFixture
) -> None:
    """The development server writes its request line while sending the answer, after the
    app's request context has gone: the id is still current then, and only until the
    server closes the answer."""
    werkzeug = logging.getLogger("werkzeug")
    with caplog.at_level(logging.INFO, logger="werkzeug"):
        response = app.test_client().get("/auth/session")
        werkzeug.info('"GET /auth/session HTTP/1.1" 200 -')
        response.close()
        werkzeug.info(" * Detected change, reloading")
    ids = [r.request_id for r in caplog.records if r.name == "werkzeug"]  # type: ignore[attr-defined]
    assert ids == [response.headers["X-Request-ID"], "-"]


# -- the tests' identity provider and a client that leaves ------------------------------


def test_the_identity_provider_is_quiet_about_a_client_that_left(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A read-timeout test's client gives up before the answer: writing it then fails with
    a broken pipe, which used to print a traceback into the test output."""
    release, handlers = threading.Event(), []

    def stall(request: Any) -> tuple[int, dict[str, str], Any]:
        handlers.append(threading.current_thread())
        release.wait(10)
        return 200, {}, {"late": "y" * 100_000}

    with fake_idp() as fake:
        fake.routes["/token"] = stall
        with pytest.raises(requests.ReadTimeout):
            requests.post(fake.issuer + "/token", timeout=0.5)
        release.set()
        [handler] = handlers
        handler.join(timeout=10)
    assert "Traceback" not in capfd.readouterr().err


def test_the_identity_provider_still_reports_its_own_errors(
    capfd: pytest.CaptureFixture[str],
) -> None:
    handlers = []

    def broken(request: Any) -> tuple[int, dict[str, str], Any]:
        handlers.append(threading.current_thread())
        raise ValueError("a bug in the route")

    with fake_idp() as fake:
        fake.routes["/token"] = broken
        with pytest.raises(requests.ConnectionError):
            requests.post(fake.issuer + "/token", timeout=5)
        [handler] = handlers
        handler.join(timeout=10)
    err = capfd.readouterr().err
    assert "Traceback" in err and "ValueError: a bug in the route" in err
