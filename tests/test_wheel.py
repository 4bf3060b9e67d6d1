"""The wheel, as a Flask team installs it: built from the checkout, installed into a fresh
virtualenv outside it with every dependency pinned and hash-checked by requirements.lock,
then run from an empty folder (so nothing can be imported from the checkout): it tells its
version without any settings, migrates a new database, serves, and signs a person in by
e-mail through a real SMTP server; so does a host application (examples/host) that adds
the installed package with ``Auth(app)``."""

from __future__ import annotations

import email.parser
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.config import TEST_SECRET
from tests.support.mail import Mailbox, link_of
from tests.support.servers import free_port, wait_until_listening

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: The settings the app reads from the environment: none may leak in from the test run.
APP_SETTINGS = ("APP_ENV", "AUTH_", "EMAIL_", "DATABASE_", "FLASK_", "PYTHONPATH", "VIRTUAL_ENV")


@dataclass(frozen=True)
class Installed:
    """The built wheel, and the virtualenv it is installed in."""

    wheel: Path
    venv: Path

    def command(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Installed:
    """Build the wheel (from a copy of the checkout's files, as a fresh clone has them: no
    compiled catalogue, no build folder) and install it with the postgres and server extras."""
    base = tmp_path_factory.mktemp("wheel")
    source = copy_of_checkout(base / "source")
    started = time.monotonic()
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", base / "dist", source)
    built = time.monotonic()
    [wheel] = (base / "dist").glob("*.whl")

    venv = base / "venv"
    run(sys.executable, "-m", "venv", venv)
    pip = str(venv / "bin" / "pip")
    # pip 26.1 is the first to take pins and hashes for dependencies from a constraints file.
    run(pip, "install", "--quiet", "--upgrade", "pip>=26.1")
    # pip checks the hashes of all packages or of none: the wheel's own is given here, every
    # other comes from the lock.
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirement = base / "install.txt"
    requirement.write_text(f"{wheel}[postgres,server] --hash=sha256:{digest}\n")
    run(pip, "install", "--quiet", "-c", ROOT / "requirements.lock", "-r", requirement)
    installed_at = time.monotonic()

    # Shown in every run, as --durations is (what capsys.disabled() does, for a module fixture).
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(
            f"\ntest_wheel: built the wheel in {built - started:.1f} s, "
            f"made the virtualenv and installed the wheel in {installed_at - built:.1f} s"
        )
    return Installed(wheel, venv)


def copy_of_checkout(target: Path) -> Path:
    """Copy the files git would commit from the work tree (tracked, and new ones not
    ignored) to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():  # a tracked file deleted in the work tree is not there
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / name)
    return target


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run ``command``; return what it printed, or fail showing all of it."""
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def environment(installed: Installed, **settings: str) -> dict[str, str]:
    """This process's environment without any app setting, with the virtualenv first on
    PATH, and ``settings``."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(APP_SETTINGS)}
    path = f"{installed.venv / 'bin'}{os.pathsep}{kept.get('PATH', '')}"
    return {**kept, "PATH": path, **settings}


def test_the_wheel_holds_the_catalogues_migrations_and_licence(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        dist_info = f"webapp_signin-{PROJECT['version']}.dist-info"
        metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())

    for po_file in (ROOT / "webapp/translations").glob("*/LC_MESSAGES/messages.po"):
        assert po_file.relative_to(ROOT).with_suffix(".mo").as_posix() in names
    migrations = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "migrations").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    assert migrations and {f"webapp/{name}" for name in migrations} <= names
    assert f"{dist_info}/licenses/LICENSE" in names

    assert (metadata["Name"], metadata["Version"]) == (PROJECT["name"], PROJECT["version"])
    assert metadata["License-Expression"] == "MIT"
    # The driver and the server come with their extras only.
    unconditional = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert not [r for r in unconditional if r.lower().startswith(("psycopg", "granian"))]


def test_the_installed_package_tells_its_version_without_settings(
    installed: Installed, tmp_path: Path
) -> None:
    env = environment(installed)
    imported = run(
        installed.command("python"),
        "-c",
        "import webapp; print(webapp.__file__)",
        cwd=tmp_path,
        env=env,
    )
    assert Path(imported.strip()).is_relative_to(installed.venv)
    # Production (no APP_ENV) without AUTH_SECRET: the app could not be created.
    printed = run(installed.command("flask"), "auth", "--version", cwd=tmp_path, env=env)
    assert printed == f"{PROJECT['name']} {PROJECT['version']}\n"


@contextmanager
def serving(
    installed: Installed, folder: Path, app: str, wsgi: str, **settings: str
) -> Iterator[str]:
    """Migrate a new database with ``flask --app <app> auth migrate``, then serve ``wsgi``
    with granian on loopback from ``folder`` in production mode; yield its address."""
    port = free_port()
    env = environment(
        installed,
        APP_ENV="production",
        AUTH_SECRET=TEST_SECRET,
        AUTH_URL=f"http://127.0.0.1:{port}/auth",
        DATABASE_URL=f"sqlite:///{folder / 'site.sqlite3'}",
        **settings,
    )
    migrated = run(installed.command("flask"), "--app", app, "auth", "migrate", cwd=folder, env=env)
    assert migrated.startswith("migrated the schema from empty to "), migrated

    log = folder / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [
                installed.command("granian"),
                "--interface",
                "wsgi",
                "--workers",
                "1",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                wsgi,
            ],
            cwd=folder,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_listening(f"{url}/auth/csrf", server)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def sign_in_by_email(browser: requests.Session, url: str, mailbox: Mailbox, address: str) -> None:
    """Ask for a sign-in link at ``url``, then follow it and confirm, as a person does."""
    token = browser.get(f"{url}/auth/csrf", timeout=10).json()["csrfToken"]
    asked = browser.post(
        f"{url}/auth/signin/email",
        data={"csrfToken": token, "email": address},
        allow_redirects=False,
        timeout=10,
    )
    assert asked.status_code == 302
    assert "/auth/verify-request" in asked.headers["Location"]
    # Sent before the answer: the app delivers the message within the request.
    link = urlsplit(link_of(mailbox.last()))

    page = browser.get(f"{url}{link.path}?{link.query}", timeout=10)
    assert page.status_code == 200
    form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page.text))
    signed_in = browser.post(f"{url}{link.path}", data=form, allow_redirects=False, timeout=10)
    assert signed_in.status_code == 302, signed_in.text


def test_the_installed_app_migrates_serves_and_signs_in_by_email(
    installed: Installed, tmp_path: Path, mailbox: Mailbox
) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    with (
        serving(
            installed, folder, "webapp:create_app", "webapp.wsgi:app", EMAIL_SERVER=mailbox.url()
        ) as url,
        requests.Session() as browser,
    ):
        sign_in_by_email(browser, url, mailbox, "ann@example.com")
        session = browser.get(f"{url}/auth/session", timeout=10).json()
    assert session["user"]["email"] == "ann@example.com"


def test_a_host_app_adds_the_installed_package(
    installed: Installed, tmp_path: Path, mailbox: Mailbox
) -> None:
    """examples/host, copied into an empty folder: its own pages and sign-in page, ours
    under /auth, one Auth(app) line, with the installed package."""
    folder = tmp_path / "host"
    shutil.copytree(ROOT / "examples" / "host", folder, ignore=shutil.ignore_patterns("instance"))
    with (
        serving(
            installed,
            folder,
            "app.py",
            "app:app",
            EMAIL_SERVER=mailbox.url(),
            EMAIL_FROM="Example host <auth@example.com>",
        ) as url,
        requests.Session() as browser,
    ):
        refused = browser.get(f"{url}/reports", allow_redirects=False, timeout=10)
        assert refused.status_code == 302
        assert "/auth/signin?" in refused.headers["Location"]
        signin = browser.get(f"{url}/auth/signin", timeout=10).text
        assert "Welcome back to the example host" in signin  # the host's own template

        sign_in_by_email(browser, url, mailbox, "host.person@example.com")
        reports = browser.get(f"{url}/reports", timeout=10)
    assert reports.status_code == 200
    assert "Reports for host.person@example.com" in reports.text
