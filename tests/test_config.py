"""Start-up configuration (spec §1): defaults, the TOML file, and clear errors."""

from __future__ import annotations

import pytest

from webapp import create_app
from webapp.settings import ConfigError, load_settings

SECRET = "s" * 40


def settings(env=None, **overrides):
    return load_settings(env or {}, overrides, instance_path="/tmp/webapp-test-instance")


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
    assert conf.auth_url == "http://127.0.0.1:5000/auth"
    assert conf.base_path == "/auth" and conf.origin == "http://127.0.0.1:5000"
    assert conf.database_url.startswith("sqlite:///") and conf.demo_credentials
    assert conf.email_from == "no-reply@127.0.0.1"
    assert conf.session_max_age.days == 30 and conf.session_update_age.days == 1


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
        ("[[providers]]\nid = 'a'\ntype = 'saml'\n", "provider 'a': unknown type 'saml'"),
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
