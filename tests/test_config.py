"""Start-up configuration: defaults (docs/constants.md), the TOML file, and clear errors
(docs/errors.md, "Start-up errors")."""

from __future__ import annotations

import logging

import click
import pytest

from webapp import create_app
from webapp.settings import ConfigError, load_settings
from webapp.settings.dev_server import DevServer, dev_server

SECRET = "s" * 40
#: An app behind a transaction pooler (PgBouncer on "pooler").
POOLED = {"DATABASE_POOLER": "transaction", "DATABASE_URL": "postgresql://u:pw@pooler:6432/app"}


#: A database URL for production settings, which need one (set DATABASE_URL="" for none).
DATABASE = {"DATABASE_URL": "postgresql://app@db.example/app"}


def settings(env=None, **overrides):
    env = env or {}
    if env.get("APP_ENV") != "development":
        env = {**DATABASE, **env}
    return load_settings(env, overrides, instance_path="/tmp/webapp-test-instance")


def test_production_requires_auth_secret():
    with pytest.raises(ConfigError, match="AUTH_SECRET is required outside development"):
        settings({"AUTH_URL": "https://example.com/auth"})


def test_production_is_the_default_environment():
    with pytest.raises(ConfigError, match="AUTH_SECRET"):
        settings({})


def test_development_generates_and_keeps_a_secret(tmp_path):
    first = load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    again = load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    assert len(first.secret) >= 32 and first.secret == again.secret
    assert (tmp_path / "dev-auth-secret").stat().st_mode & 0o077 == 0


def test_development_defaults():
    conf = settings({"APP_ENV": "development"})
    # localhost, not 127.0.0.1: browsers refuse an IP address as a passkey's relying party.
    assert conf.auth_url == "http://localhost:5000/auth"
    assert conf.base_path == "/auth" and conf.origin == "http://localhost:5000"
    assert conf.database_url.startswith("sqlite:///") and conf.demo_credentials
    assert conf.email_from == "no-reply@localhost"
    assert conf.session_max_age.days == 30 and conf.session_update_age.days == 1
    # Under another server than `flask run` the port is unknown: links follow the request.
    assert conf.auth_url_from_request


@pytest.mark.parametrize(
    "served,auth_url",
    [
        (DevServer("127.0.0.1", 5002), "http://localhost:5002/auth"),
        (DevServer("localhost", 5003), "http://localhost:5003/auth"),
        (DevServer("::1", 5004), "http://localhost:5004/auth"),
        (DevServer("0.0.0.0", 8080), "http://localhost:8080/auth"),
        (DevServer("::", 8080), "http://localhost:8080/auth"),
        (DevServer("192.168.1.20", 5000), "http://192.168.1.20:5000/auth"),
        (DevServer("fd00::20", 5000), "http://[fd00::20]:5000/auth"),
        (DevServer("Dev.Example", 5000), "http://dev.example:5000/auth"),
        (DevServer("127.0.0.1", 5443, https=True), "https://localhost:5443/auth"),
    ],
)
def test_development_auth_url_is_where_flask_run_serves(served, auth_url):
    """``flask run`` on any port (--port, -p, FLASK_RUN_PORT, scripts/dev's PORT): links,
    redirects and e-mails name that port; a loopback or wildcard address is named
    ``localhost``."""
    conf = load_settings(
        {"APP_ENV": "development", "AUTH_SECRET": SECRET},
        instance_path="/tmp/webapp-test-instance",
        served=served,
    )
    assert conf.auth_url == auth_url and not conf.auth_url_from_request


def test_flask_run_on_port_0_without_auth_url_stops_start_up():
    with pytest.raises(
        ConfigError, match=r"flask run --port 0 .* give the port .* or set AUTH_URL"
    ):
        load_settings(
            {"APP_ENV": "development", "AUTH_SECRET": SECRET},
            instance_path="/tmp/webapp-test-instance",
            served=DevServer("127.0.0.1", 0),
        )


def test_a_development_auth_url_naming_another_port_is_kept_with_a_warning(caplog):
    """A proxy or port mapping may forward AUTH_URL's port to the one served, so the given
    AUTH_URL stands; the warning says where links lead and how to change it."""
    env = {
        "APP_ENV": "development",
        "AUTH_SECRET": SECRET,
        "AUTH_URL": "http://localhost:5000/auth",
    }
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = load_settings(env, instance_path="/tmp/x", served=DevServer("127.0.0.1", 5002))
        load_settings(env, instance_path="/tmp/x", served=DevServer("127.0.0.1", 5000))
        load_settings(
            {**env, "AUTH_URL": "http://localhost/auth"},
            instance_path="/tmp/x",
            served=DevServer("127.0.0.1", 80),
        )
    assert conf.auth_url == "http://localhost:5000/auth"
    [warning] = caplog.records
    assert warning.getMessage().startswith(
        "AUTH_URL is http://localhost:5000/auth but this server listens on port 5002: every "
        "link and redirect leads to port 5000."
    )
    assert "unset AUTH_URL (development then uses http://localhost:5002/auth)" in (
        warning.getMessage()
    )


def test_production_takes_no_address_from_flask_run():
    with pytest.raises(ConfigError, match="AUTH_URL is required"):
        load_settings(
            {"AUTH_SECRET": SECRET}, instance_path="/tmp/x", served=DevServer("127.0.0.1", 5002)
        )


def test_flask_run_s_options_are_read_from_its_command_only():
    from flask.cli import run_command

    assert dev_server() is None
    with click.Context(run_command, info_name="run") as ctx:
        ctx.params.update(host="0.0.0.0", port=5005, cert=None)
        assert dev_server() == DevServer("0.0.0.0", 5005, https=False)
    with click.Context(click.Command("cleanup"), info_name="cleanup"):
        assert dev_server() is None


def test_secret_must_be_long_enough():
    with pytest.raises(ConfigError, match="at least 32 characters"):
        settings({"AUTH_SECRET": "short", "AUTH_URL": "https://e.com/auth"})


def test_secret_never_appears_in_errors():
    secret = "hunter2-" * 5
    with pytest.raises(ConfigError) as info:
        settings({"AUTH_SECRET": secret, "AUTH_URL": "ftp://x"})
    assert secret not in str(info.value)


@pytest.mark.parametrize(
    "env,match",
    [
        ({"APP_ENV": "staging"}, "APP_ENV must be one of"),
        ({"AUTH_URL": "example.com/auth"}, "AUTH_URL must be an absolute"),
        ({"AUTH_URL": "https://u:p@example.com/auth"}, "AUTH_URL must not carry"),
        ({"AUTH_TRUST_HOST": "maybe"}, "AUTH_TRUST_HOST must be true or false"),
        ({"AUTH_BRAND_COLOR": "red"}, "AUTH_BRAND_COLOR"),
        ({"AUTH_DEMO_CREDENTIALS": "true"}, "cannot be enabled outside development"),
        ({"AUTH_CONFIG": "/nonexistent/auth.toml"}, "AUTH_CONFIG: file not found"),
        ({"AUTH_TOKEN_REFRESH_MARGIN": "-1"}, "AUTH_TOKEN_REFRESH_MARGIN must be at least 0"),
        ({"AUTH_TOKEN_REFRESH_MARGIN": "60\x00"}, "AUTH_TOKEN_REFRESH_MARGIN must be a whole"),
        ({"AUTH_BEARER_CACHE_TTL": "1e9999"}, "AUTH_BEARER_CACHE_TTL must be a whole number"),
        ({"AUTH_BEARER_CACHE_TTL": "60\r\nX: y"}, "AUTH_BEARER_CACHE_TTL must be a whole"),
        (
            {"AUTH_PASSKEYS": "true", "AUTH_URL": "https://203.0.113.9/auth"},
            "AUTH_PASSKEYS needs a domain name",
        ),
        (
            {"AUTH_PASSKEYS": "true", "AUTH_PASSKEY_RP_ID": "other.example"},
            "AUTH_PASSKEY_RP_ID 'other.example' must be AUTH_URL's host",
        ),
        ({"AUTH_SECOND_FACTOR_LIMIT": "five"}, "AUTH_SECOND_FACTOR_LIMIT"),
        ({"DATABASE_POOLER": "session"}, "DATABASE_POOLER must be one of none, transaction"),
        ({"MIGRATE_ON_START": "maybe"}, "MIGRATE_ON_START must be true or false"),
        ({"DATABASE_DIRECT_URL": "sqlite:///x.db"}, "DATABASE_DIRECT_URL must be a PostgreSQL"),
        # Known bad behind a transaction pooler (docs/scaling.md):
        (
            {"DATABASE_POOLER": "transaction", "DATABASE_URL": "sqlite:////tmp/x.db"},
            "needs a PostgreSQL DATABASE_URL",
        ),
        (
            {**POOLED, "DATABASE_URL": POOLED["DATABASE_URL"] + "?prepare_threshold=5"},
            "DATABASE_URL sets prepare_threshold",
        ),
        (
            {**POOLED, "DATABASE_URL": POOLED["DATABASE_URL"] + "?options=-c%20search_path%3Dx"},
            "DATABASE_URL sets options",
        ),
        ({**POOLED, "MIGRATE_ON_START": "true"}, "MIGRATE_ON_START .* needs DATABASE_DIRECT_URL"),
        (
            {**POOLED, "DATABASE_DIRECT_URL": "postgresql://u:pw@pooler:6432/app"},
            "DATABASE_DIRECT_URL names the same host and port as DATABASE_URL",
        ),
    ],
)
def test_bad_settings_name_the_setting(env, match):
    base = {"AUTH_SECRET": SECRET, "AUTH_URL": "https://example.com/auth"}
    with pytest.raises(ConfigError, match=match):
        settings({**base, **env})


def test_production_requires_auth_url():
    with pytest.raises(ConfigError, match="AUTH_URL is required"):
        settings({"AUTH_SECRET": SECRET})


def test_production_needs_no_more_than_secret_and_url():
    conf = settings({"AUTH_SECRET": SECRET, "AUTH_URL": "https://example.com/auth/"})
    assert conf.auth_url == "https://example.com/auth" and conf.is_https
    assert not conf.demo_credentials


def test_postgres_urls_get_the_psycopg_driver():
    conf = settings({"APP_ENV": "development", "DATABASE_URL": "postgres://u@db/app"})
    assert conf.database_url == "postgresql+psycopg://u@db/app"


def test_behind_a_transaction_pooler_no_statement_is_prepared_and_migrations_go_direct():
    env = {
        "AUTH_SECRET": SECRET,
        "AUTH_URL": "https://example.com/auth",
        **POOLED,
        "DATABASE_DIRECT_URL": "postgres://u:pw@db:5432/app",
        "MIGRATE_ON_START": "true",
        "EMAIL_SERVER": "smtp://mail.example",
    }
    conf = settings(env)
    assert conf.transaction_pooler and conf.migrate_on_start
    assert conf.database_direct_url == "postgresql+psycopg://u:pw@db:5432/app"
    app = create_app(environ=env, migrations=False)
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"]["prepare_threshold"] is None
    # Without a pooler psycopg prepares a statement run often (its default threshold).
    plain = create_app(environ={**env, "DATABASE_POOLER": "none"}, migrations=False)
    assert "prepare_threshold" not in plain.config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"]


def test_database_errors_never_show_the_password():
    env = {**POOLED, "DATABASE_DIRECT_URL": "postgresql://u:hunter2@pooler:6432/app"}
    with pytest.raises(ConfigError) as info:
        settings({"AUTH_SECRET": SECRET, "AUTH_URL": "https://example.com/auth", **env})
    assert "hunter2" not in str(info.value) and "pw" not in str(info.value)


@pytest.mark.parametrize(
    "toml,match",
    [
        ("[[providers]]\ntype = 'credentials'\n", r"provider #1: id must match"),
        ("[[providers]]\nid = 'Bad Id'\ntype = 'credentials'\n", "id must match"),
        ("[[providers]]\nid = 'a'\n", "provider 'a': type is required"),
        (
            "[[providers]]\nid = 'a'\ntype = 'credentials'\n[[providers]]\nid = 'a'\n"
            "type = 'credentials'\n",
            "provider 'a': duplicate id",
        ),
        ("[[providers]]\nid = 'a'\ntype = 'ldap'\n", "provider 'a': unknown type 'ldap'"),
        (
            "[[providers]]\nid = 'a'\ntype = 'credentials'\nfields = []\n",
            "provider 'a': fields must be",
        ),
        ("this is = not toml", "is not valid TOML"),
        ("providers = 3\n", "must be \\[\\[providers\\]\\] tables"),
    ],
)
def test_bad_provider_configuration_names_the_provider(tmp_path, toml, match):
    path = tmp_path / "auth.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=match):
        create_app(
            {
                "APP_ENV": "development",
                "AUTH_SECRET": SECRET,
                "AUTH_CONFIG": str(path),
                "DATABASE_URL": "sqlite://",
                "TESTING": True,
            },
            environ={},
        )


def test_toml_auth_table_supplies_settings_and_env_wins(tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(
        '[auth]\nurl = "https://toml.example/auth"\nsecret = "' + "t" * 40 + '"\n'
        '[auth.brand]\nname = "Acme"\ncolor = "#123456"\n'
    )
    conf = settings({"AUTH_CONFIG": str(path)})
    assert conf.auth_url == "https://toml.example/auth"
    assert conf.brand.name == "Acme" and conf.brand.color == "#123456"
    conf = settings({"AUTH_CONFIG": str(path), "AUTH_URL": "https://env.example/auth"})
    assert conf.auth_url == "https://env.example/auth"


def test_previous_secrets_are_accepted_for_reading(make_app):
    """After a rotation the CSRF cookie signed with the old secret is still read.

    Tokens already handed out are signed by Flask-WTF with the current key only, so a form
    rendered before the restart fails once with MissingCSRF; the next page works.
    """
    old = "o" * 40
    client = make_app(AUTH_SECRET=old).test_client()
    client.get("/auth/csrf")
    old_cookie = client.get_cookie("auth.csrf-token").value

    rotated = make_app(AUTH_SECRET="n" * 40, AUTH_PREVIOUS_SECRETS=old).test_client()
    rotated.set_cookie("auth.csrf-token", old_cookie)
    r = rotated.get("/auth/csrf")
    token = r.json["csrfToken"]
    assert "auth.csrf-token" not in r.headers.get("Set-Cookie", "")  # old cookie was readable
    r = rotated.post("/auth/signout", data={"csrfToken": token})
    assert r.headers["Location"] == "http://localhost/"

    unrelated = make_app(AUTH_SECRET="n" * 40).test_client()
    unrelated.set_cookie("auth.csrf-token", old_cookie)
    assert "auth.csrf-token=" in unrelated.get("/auth/csrf").headers["Set-Cookie"]
