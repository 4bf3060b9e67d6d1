"""Start-up mistakes an operator makes on day one, each made the way the operator made it
(the CLI or the production server, in a new process with a clean environment): one line
naming the cause, and a non-zero exit status; and what start-up says when it works.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from .saml.forgery import own_key
from .saml.static_idp import idp_metadata
from .support.config import TEST_SECRET
from .support.mail import EmailActions
from .support.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
FLASK = [sys.executable, "-m", "flask", "--app", "app"]
#: Production settings that start, but for what a test takes away or spoils.
PRODUCTION = {
    "APP_ENV": "production",
    "AUTH_SECRET": TEST_SECRET,
    "AUTH_URL": "https://example.com/auth",
    "EMAIL_SERVER": "smtp://127.0.0.1:2525",
}


def run(command: list[str], tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """``command`` in the checkout, with only the system's PATH and ``settings`` (the
    development ``instance`` folder is ``tmp_path``'s, through FLASK_INSTANCE_PATH-free
    settings: every run here names its database)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **settings}
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed start printed (on stderr), with the exit status non-zero."""
    assert result.returncode != 0, result
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("notaurl", "Error: DATABASE_URL is not a database URL: expected postgresql://"),
        ("mysql://app:pw@db.example/app", "Error: DATABASE_URL names mysql, which is not"),
        ("postgresql+psycopg2://app:pw@db/app", "Error: DATABASE_URL names the driver psycopg2"),
        (
            "postgresql://app:hunter2@127.0.0.1:1/app",
            "Error: the database (DATABASE_URL) cannot be reached: connection failed:"
            ' connection to server at "127.0.0.1", port 1 failed: Connection refused',
        ),
        ("", "Error: DATABASE_URL is required outside development"),
    ],
    ids=["not-a-url", "mysql", "other-driver", "postgresql-down", "unset"],
)
def test_a_bad_database_url_is_one_line_naming_it(tmp_path: Path, url: str, said: str) -> None:
    result = run([*FLASK, "auth", "cleanup"], tmp_path, **PRODUCTION, DATABASE_URL=url)
    line = one_line(result)
    assert line.startswith(said), line
    assert "hunter2" not in line and "pw@" not in line


def test_the_production_server_checks_the_settings_once_before_any_worker(
    tmp_path: Path,
) -> None:
    """Without AUTH_SECRET: one line and status 1, at once, instead of every worker
    crashing on it and being respawned."""
    settings = {k: v for k, v in PRODUCTION.items() if k != "AUTH_SECRET"}
    started = time.monotonic()
    result = run(
        [sys.executable, "deploy/serve.py"],
        tmp_path,
        **settings,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        PORT=str(free_port()),
        WEB_CONCURRENCY="2",
    )
    assert one_line(result).startswith("error: AUTH_SECRET is required outside development")
    assert result.returncode == 1
    assert time.monotonic() - started < 30


def test_the_production_server_refuses_to_start_with_no_sign_in_method(tmp_path: Path) -> None:
    settings = {k: v for k, v in PRODUCTION.items() if k != "EMAIL_SERVER"}
    result = run(
        [sys.executable, "deploy/serve.py"],
        tmp_path,
        **settings,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        PORT=str(free_port()),
    )
    assert one_line(result).startswith("error: no sign-in method is configured: set EMAIL_SERVER")


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[[provider]]\nid = "corp"\n',
            "Error: AUTH_CONFIG: unknown key 'provider' in {path}; it takes [auth] and"
            " [[providers]] (did you mean 'providers'?)",
        ),
        (
            '[auth]\nsesion_max_age_absolute = "30d"\n',
            "Error: AUTH_CONFIG: unknown key 'sesion_max_age_absolute' in [auth] of {path}"
            " (did you mean 'session_max_age_absolute'?)",
        ),
        (
            '[auth.brand]\ncolour = "#123456"\n',
            "Error: [auth.brand] has no key 'colour'; it takes name, logo, color (did you"
            " mean 'color'?)",
        ),
        (
            '[[providers]]\nid = "corp"\ntype = "oidc"\nissuer = "https://idp.example"\n'
            'client_id = "c"\nclient_secret = "s"\nscopes = "openid"\n',
            "Error: provider 'corp': unknown field 'scopes' (did you mean 'scope'?)",
        ),
        (
            '[[providers]]\nid = "mail"\ntype = "email"\nnmae = "E-mail"\n',
            "Error: provider 'mail': unknown field 'nmae' (did you mean 'name'?)",
        ),
    ],
    ids=["top-level", "auth-table", "brand-table", "oidc-provider", "email-provider"],
)
def test_a_typo_in_the_toml_file_is_refused_naming_the_nearest_key(
    tmp_path: Path, toml: str, said: str
) -> None:
    path = tmp_path / "auth.toml"
    path.write_text(toml)
    result = run(
        [*FLASK, "auth", "cleanup"],
        tmp_path,
        **PRODUCTION,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        AUTH_CONFIG=str(path),
    )
    assert one_line(result) == said.format(path=path)


def test_a_saml_metadata_file_whose_signature_fails_is_one_line(tmp_path: Path) -> None:
    """A SAML provider whose metadata file is unsigned, while the provider names the
    certificate that must have signed it: one line, whatever pysaml2 logs as it loads."""
    key, cert = own_key(tmp_path)
    (tmp_path / "idp.xml").write_text(
        idp_metadata("https://idp.example/metadata", "https://idp.example/sso", cert)
    )
    (tmp_path / "auth.toml").write_text(
        '[[providers]]\nid = "acme"\ntype = "saml"\nidp_metadata_file = "idp.xml"\n'
        f'idp_metadata_cert_file = "{cert}"\nsp_key_file = "{key}"\nsp_cert_file = "{cert}"\n'
    )
    result = run(
        [*FLASK, "auth", "cleanup"],
        tmp_path,
        **PRODUCTION,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        AUTH_CONFIG=str(tmp_path / "auth.toml"),
    )
    assert one_line(result) == (
        "Error: provider 'acme': idp_metadata_file: metadata not signed"
        " (no signature as the root's first child)"
    )


def test_help_needs_no_settings_and_commands_say_nothing_of_serving(tmp_path: Path) -> None:
    helped = run([*FLASK, "auth", "--help"], tmp_path)
    assert helped.returncode == 0 and "Inspect and clean up sign-in data." in helped.stdout
    assert helped.stderr == ""
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    migrated = run([*FLASK, "auth", "migrate"], tmp_path, **PRODUCTION, DATABASE_URL=database)
    assert migrated.returncode == 0, migrated.stderr
    cleaned = run([*FLASK, "auth", "cleanup"], tmp_path, **PRODUCTION, DATABASE_URL=database)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "serving" not in cleaned.stderr and "sign-in methods" not in cleaned.stderr
    assert "mail:" not in cleaned.stderr


def start_up_lines(make_app: Any, caplog: pytest.LogCaptureFixture, **settings: Any) -> list[str]:
    with caplog.at_level(logging.INFO, logger="webapp.web"):
        make_app(**settings)
    return [r.getMessage() for r in caplog.records if r.name == "webapp.web"]


def test_start_up_names_the_sign_in_methods_and_why_e_mail_is_off(
    make_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Declaring a provider turns the development outbox's e-mail sign-in off: people who
    signed up by e-mail would lose their way in without a word."""
    corp = {"id": "corp", "type": "oidc", "issuer": "https://idp.example", "client_id": "c",
            "client_secret": "s" * 32}  # fmt: skip
    assert start_up_lines(make_app, caplog, AUTH_PROVIDERS=[corp]) == [
        "sign-in methods: corp (oidc), demo (credentials), passkey (webauthn); e-mail sign-in"
        " is off: no EMAIL_SERVER, and providers are declared, none of type email (the"
        " development outbox stands in only when none is)"
    ]
    caplog.clear()
    assert start_up_lines(make_app, caplog) == [
        "sign-in methods: email (email), demo (credentials), passkey (webauthn)"
    ]


def test_a_throttled_e_mail_request_in_development_says_so_naming_the_setting(
    make_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app: Flask = make_app(EMAIL_ADDRESS_LIMIT="1/10m", EMAIL_ADDRESS_IP_LIMIT="1/10m")
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    with caplog.at_level(logging.WARNING, logger="webapp.flows.signin.email"):
        answer = actions.request_link("ann@example.com")
    # The answer is the one production gives (it must not tell whether a message went).
    assert answer.headers["Location"].startswith("http://localhost/auth/verify-request")
    [warning] = [r.getMessage() for r in caplog.records if r.name == "webapp.flows.signin.email"]
    assert warning == (
        "development: this e-mail sign-in request was throttled (1/600s): no message was"
        " sent, though the page says one was; raise EMAIL_ADDRESS_IP_LIMIT to test more often"
    )
    assert "ann@example.com" not in warning
