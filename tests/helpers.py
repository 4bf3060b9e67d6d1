"""Plain helpers shared by the tests (their fixtures are in conftest.py).

``free_port`` finds a loopback port nobody listens on; ``row_count`` counts rows;
``hearing_of_new_rows`` listens to the signals of new users and accounts;
``demo_sign_in`` and ``AuthActions`` sign a test client in through the real routes with
the development demo credentials; ``NewSession`` is what the ``session_factory`` fixture
returns.
"""

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
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from webapp.auth.hooks import account_linked, user_created
from webapp.extensions import db
from webapp.models import Account, User

DEMO_EMAIL = "ann@example.com"
DEMO_PASSWORD = "demo"


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago (nothing listens on it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def row_count(app: Flask, model: Any, **filters: Any) -> int:
    """Count ``model``'s rows, those matching ``filters`` (column=value) if given."""
    with app.app_context():
        query = sa.select(sa.func.count()).select_from(model).filter_by(**filters)
        return int(db.session.execute(query).scalar_one())


@contextmanager
def hearing_of_new_rows(app: Flask) -> Iterator[list[tuple[str, int]]]:
    """Listen to ``user_created`` and ``account_linked`` meanwhile: each as heard, with how
    many rows of its kind were committed then (``row_count`` reads in a session and on a
    connection of its own)."""
    heard: list[tuple[str, int]] = []

    def on_user_created(_sender: Any, **_: Any) -> None:
        heard.append(("user_created", row_count(app, User)))

    def on_account_linked(_sender: Any, **_: Any) -> None:
        heard.append(("account_linked", row_count(app, Account)))

    with (
        user_created.connected_to(on_user_created),
        account_linked.connected_to(on_account_linked),
    ):
        yield heard


def demo_sign_in(
    client: FlaskClient,
    email: str = DEMO_EMAIL,
    password: str = DEMO_PASSWORD,
    *,
    headers: dict[str, str] | None = None,
    base_url: str | None = None,
    **form: str,
) -> Any:
    """POST the demo credentials form (development provider) as a browser would.

    Fetches a CSRF token first; ``form`` adds fields (``callbackUrl``…), ``headers`` and
    ``base_url`` go to the POST (``base_url`` to the token request as well). Returns the
    app's answer: a 302 home (or to ``callbackUrl``) on success, to ``?error=`` otherwise.
    """
    csrf = client.get("/auth/csrf", base_url=base_url).json["csrfToken"]  # type: ignore[index]
    data = {"csrfToken": csrf, "email": email, "password": password, **form}
    return client.post("/auth/callback/demo", data=data, headers=headers, base_url=base_url)


class AuthActions:
    """Sign-in actions through the real routes (the demo credentials provider)."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client

    def csrf(self) -> str:
        return str(self.client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]

    def signin(self, email: str = DEMO_EMAIL, password: str = DEMO_PASSWORD, **form: Any) -> Any:
        """``demo_sign_in`` with this client (``form`` may hold ``headers`` and ``base_url``)."""
        return demo_sign_in(self.client, email, password, **form)

    def signout(self, **form: str) -> Any:
        return self.client.post("/auth/signout", data={"csrfToken": self.csrf(), **form})

    def session_cookie(self) -> str | None:
        cookie = self.client.get_cookie("auth.session-token")
        return cookie.value if cookie else None


@dataclass(frozen=True)
class NewSession:
    """A session row made by ``session_factory``; ``token`` is its working cookie value."""

    id: int
    user_id: int
    token: str
    token_hash: str


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
    from .conftest import TEST_SECRET, migrate_database

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
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        **settings,
    }
    root = Path(__file__).resolve().parent.parent
    with access.open("ab") as out, errors.open("ab") as err:
        server = subprocess.Popen(
            [sys.executable, "deploy/serve.py"], cwd=root, env=env, stdout=out, stderr=err
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_listening(f"{url}/auth/csrf", server)
        yield Server(url, port, access, errors, server)
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def read_rows(database_url: str, sql: str, **params: Any) -> list[Any]:
    """Rows read from the database directly, on a connection of their own."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params))
    finally:
        engine.dispose()


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


# -- two-step verification: the authenticator app's codes, enrolment, the second-factor page

#: The key the set-up page shows (in groups of four), and each recovery code it shows once.
TOTP_KEY_PATTERN = r'<code class="secret" id="totp-key">([A-Z2-7 ]+)</code>'
RECOVERY_CODE_PATTERN = r"<li><code>([a-z2-7]{4}(?:-[a-z2-7]{4}){3})</code></li>"


def totp_code(secret: str, at: float | None = None, *, steps: int = 0) -> str:
    """The authenticator app's code for ``secret`` (base32) at ``at`` (epoch seconds; now by
    default, which freezegun freezes), ``steps`` 30-second steps later (or earlier)."""
    import pyotp

    moment = time.time() if at is None else at
    return str(pyotp.TOTP(secret).generate_otp(int(moment) // 30 + steps))


def enrol_authenticator(client: FlaskClient) -> tuple[str, list[str]]:
    """Turn two-step verification on for ``client``'s signed-in user through the account
    pages, as a person would (read the key, type the app's current code); return the key
    (base32, no spaces) and the ten recovery codes. Spends the current time step."""
    import re

    page = client.get("/account/two-factor")
    assert page.status_code == 200, page.headers.get("Location")
    found = re.search(TOTP_KEY_PATTERN, page.get_data(as_text=True))
    assert found, page.get_data(as_text=True)
    key = found[1].replace(" ", "")
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    done = client.post("/account/two-factor", data={"csrfToken": csrf, "code": totp_code(key)})
    assert done.status_code == 200, done.status_code
    codes = re.findall(RECOVERY_CODE_PATTERN, done.get_data(as_text=True))
    assert len(codes) == 10, done.get_data(as_text=True)
    return key, codes


def submit_second_factor(client: FlaskClient, code: str, **kwargs: Any) -> Any:
    """POST ``code`` to the second-factor page as its form does (``kwargs`` go to the POST:
    ``environ_base``…); return the answer: a 302 to the sign-in's callbackUrl, a 400 page
    for a wrong code, or a 302 to the error route."""
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    return client.post("/auth/second-factor", data={"csrfToken": csrf, "code": code}, **kwargs)
