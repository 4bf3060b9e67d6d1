"""How e-mail sign-in is enabled, the development outbox, and the schema migration."""

from __future__ import annotations

import logging
import stat

import pytest
import sqlalchemy as sa
from flask_migrate import downgrade, upgrade

from webapp import MIGRATIONS_DIR, create_app
from webapp.settings import ConfigError
from webapp.storage.db import db

from .support.config import base_config
from .support.databases import migrate_database
from .support.mail import EmailActions

EMAIL_COLUMNS = {"code_hash", "browser_hash", "attempts", "callback_url"}


def write_config(tmp_path, text: str) -> str:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    return str(path)


def test_a_fresh_development_setup_offers_email_through_the_outbox(make_app, outbox, caplog):
    app = make_app(EMAIL_OUTBOX=str(outbox.folder))
    client = app.test_client()
    assert client.get("/auth/providers").json["email"] == {
        "id": "email",
        "name": "E-mail",
        "type": "email",
        "signinUrl": "http://localhost/auth/signin/email",
        "callbackUrl": "http://localhost/auth/callback/email",
    }
    assert 'action="/auth/signin/email"' in client.get("/auth/signin").get_data(as_text=True)

    actions = EmailActions(client)
    with caplog.at_level(logging.INFO, logger="webapp.mail.delivery"):
        actions.request_link("ann@example.com")
    [eml] = outbox.folder.glob("*.eml")
    # The file holds a live link: only its owner may read it.
    assert stat.S_IMODE(eml.stat().st_mode) == 0o600
    link = outbox.last_link()
    assert link in caplog.text  # the log shows the link too
    # The .eml's body is quoted-printable; the plain text beside it has the link whole,
    # to copy from.
    text = eml.with_suffix(".txt")
    assert stat.S_IMODE(text.stat().st_mode) == 0o600
    assert link in text.read_text() and link not in eml.read_text()

    assert actions.confirm(link).headers["Location"] == "http://localhost/"
    assert actions.session_email() == "ann@example.com"


def test_email_server_alone_enables_email_sign_in_in_production(make_app, mailbox):
    app = make_app(APP_ENV="production", EMAIL_SERVER=mailbox.url())
    assert list(app.test_client().get("/auth/providers").json) == ["email"]


def test_a_configured_email_provider_keeps_its_id_and_name(make_app, mailbox, tmp_path):
    config = write_config(
        tmp_path, '[[providers]]\nid = "magic"\ntype = "email"\nname = "Magic link"\n'
    )
    app = make_app(AUTH_CONFIG=config, EMAIL_SERVER=mailbox.url())
    providers = app.test_client().get("/auth/providers").json
    assert [p["id"] for p in providers.values() if p["type"] == "email"] == ["magic"]
    assert providers["magic"]["name"] == "Magic link"

    actions = EmailActions(app.test_client(), provider="magic")
    assert actions.request_link("ann@example.com").headers["Location"] == (
        "http://localhost/auth/verify-request?provider=magic&type=email"
    )
    link = mailbox.messages[-1].get_body(("plain",)).get_content()
    assert "http://localhost/auth/callback/magic?token=" in link


def test_no_email_provider_when_others_are_configured_and_no_server(make_app, tmp_path):
    config = write_config(tmp_path, '[[providers]]\nid = "pw"\ntype = "credentials"\n')
    app = make_app(AUTH_CONFIG=config)
    assert "email" not in app.test_client().get("/auth/providers").json


def test_an_email_provider_without_a_server_stops_production_start_up(make_app, tmp_path):
    config = write_config(tmp_path, '[[providers]]\nid = "magic"\ntype = "email"\n')
    with pytest.raises(ConfigError, match="provider 'magic': EMAIL_SERVER is required"):
        make_app(APP_ENV="production", AUTH_CONFIG=config)


def test_missing_templates_folder_stops_start_up(make_app, mailbox, tmp_path):
    with pytest.raises(ConfigError, match="EMAIL_TEMPLATES: folder not found"):
        make_app(EMAIL_SERVER=mailbox.url(), EMAIL_TEMPLATES=str(tmp_path / "nope"))


def test_an_outbox_that_cannot_be_written_is_email_signin(make_app, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    app = make_app(EMAIL_OUTBOX=str(blocker / "outbox"))
    r = EmailActions(app.test_client()).request_link("ann@example.com")
    assert r.headers["Location"].endswith("/auth/error?error=EmailSignin")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_migration_0002_runs_down_and_up(kind, tmp_path, request):
    url = (
        "sqlite:///" + str(tmp_path / "m.sqlite3")
        if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    migrate_database(url)
    app = create_app(base_config(url), environ={})

    def columns() -> set[str]:
        return {c["name"] for c in sa.inspect(db.engine).get_columns("verification_tokens")}

    with app.app_context():
        assert EMAIL_COLUMNS <= columns()
        downgrade(directory=str(MIGRATIONS_DIR), revision="0001_initial")
        assert not EMAIL_COLUMNS & columns()
        upgrade(directory=str(MIGRATIONS_DIR))
        assert EMAIL_COLUMNS <= columns()
        if kind == "postgresql":
            comment = sa.inspect(db.engine).get_table_comment("verification_tokens")["text"]
            assert "keyed hashes" in comment
        db.engine.dispose()
