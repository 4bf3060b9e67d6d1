"""examples/host: an application of its own that adds the facility with ``Auth(app)``,
run end to end: ``flask auth migrate`` on a new database, an e-mail sign-in through a real
SMTP server, its protected view, and its own sign-in page in place of ours."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from flask import Flask

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.db import db

from .support.config import TEST_SECRET, base_config
from .support.databases import create_pg_database, drop_pg_database, migrate_database
from .support.mail import EmailActions, Mailbox, link_of

pytestmark = pytest.mark.e2e

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "host" / "app.py"


@pytest.fixture
def host_settings(mailbox: Mailbox) -> Iterator[dict[str, str]]:
    """The example's settings, on a new PostgreSQL database."""
    url = create_pg_database("webapp_host_app")
    yield {
        "APP_ENV": "production",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "https://localhost/auth",
        "DATABASE_URL": url,
        "EMAIL_SERVER": mailbox.url(),
        "EMAIL_FROM": "Example host <auth@example.com>",
        "EMAIL_TIMEOUT": "5",
    }
    drop_pg_database(url)


def _load_example(monkeypatch: pytest.MonkeyPatch, settings: dict[str, str]) -> Flask:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("example_host_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Flask finds the app's folder (its templates) through the module's entry.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    app: Flask = module.app
    return app


def test_the_example_host_migrates_signs_in_by_email_and_shows_its_own_pages(
    host_settings: dict[str, str], mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate = subprocess.run(
        [sys.executable, "-m", "flask", "--app", str(EXAMPLE), "auth", "migrate"],
        env={**os.environ, **host_settings},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    assert "migrated the schema from empty to" in migrate.stdout
    with sa.create_engine(host_settings["DATABASE_URL"], poolclass=sa.pool.NullPool).connect() as c:
        tables = set(sa.inspect(c).get_table_names())
    assert {"users", "sessions", "auth_alembic_version"} <= tables
    assert "alembic_version" not in tables  # left to the application's own history

    app = _load_example(monkeypatch, host_settings)
    client = app.test_client()
    client.environ_base["wsgi.url_scheme"] = "https"

    # The application's own pages are its own, headers included; its protected one sends a
    # stranger to sign in.
    home = client.get("/")
    assert "Example host" in home.get_data(as_text=True)
    assert "Content-Security-Policy" not in home.headers
    refused = client.get("/reports")
    assert refused.status_code == 302
    assert refused.headers["Location"].startswith("https://localhost/auth/signin?")

    # Its sign-in page replaces ours, and our assets are served under /auth/static.
    answer = client.get("/auth/signin")
    signin = answer.get_data(as_text=True)
    assert "Welcome back to the example host" in signin
    assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    assert "provider-chooser" not in signin  # our page's island
    with client.get("/auth/static/favicon.svg") as ours:
        assert ours.status_code == 200
    assert client.get("/static/favicon.svg").status_code == 404  # the app's static folder

    # E-mail sign-in through the SMTP server on loopback.
    email = EmailActions(client)
    requested = email.request_link("host.person@example.com")
    assert requested.status_code == 302
    assert requested.headers["Location"].endswith("/auth/verify-request?provider=email&type=email")
    signed_in = email.confirm(link_of(mailbox.last()))
    assert signed_in.status_code in (302, 303)
    assert email.session_email() == "host.person@example.com"

    reports = client.get("/reports")
    assert reports.status_code == 200
    assert "Reports for host.person@example.com" in reports.get_data(as_text=True)
    # Our account page links home to the application's root.
    account = client.get("/account").get_data(as_text=True)
    assert 'class="brand" href="/"' in account
    # The application's own 404 stays Flask's; ours answers under /auth.
    assert "Not Found" in client.get("/nowhere").get_data(as_text=True)
    assert client.get("/auth/nowhere").status_code == 404


def test_a_database_of_an_earlier_release_has_our_revision_moved_once(
    empty_database: str,
) -> None:
    """Earlier releases kept our revision in ``alembic_version``; the first upgrade moves it
    to ``auth_alembic_version`` and leaves an application's own revision where it is."""
    migrate_database(empty_database, "0007_audit_trail")
    engine = sa.create_engine(empty_database, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        # The database as an earlier release left it, with an application's history too.
        conn.execute(sa.text("DROP TABLE auth_alembic_version"))
        conn.execute(
            sa.text(
                "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
            )
        )
        conn.execute(
            sa.text("INSERT INTO alembic_version VALUES ('0007_audit_trail'), ('app_0003')")
        )
    app = create_app(base_config(empty_database), environ={})
    runner = app.test_cli_runner()
    first = runner.invoke(args=["auth", "migrate"])
    assert first.output == f"migrated the schema from 0007_audit_trail to {HEAD}\n"
    again = runner.invoke(args=["auth", "migrate"])
    assert again.output == f"the schema is up to date ({HEAD}); nothing to do\n"
    with engine.connect() as conn:
        ours = conn.execute(sa.text("SELECT version_num FROM auth_alembic_version")).scalars()
        assert list(ours) == [HEAD]
        theirs = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()
        assert list(theirs) == ["app_0003"]
    engine.dispose()
    with app.app_context():
        db.engine.dispose()
