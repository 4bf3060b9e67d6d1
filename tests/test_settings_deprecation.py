"""Renamed settings (docs/explanation/versions.md): the old name keeps working, with
one warning at start-up, until the next major release removes it.

No setting has been renamed yet, so these tests put renames of their own in the table."""

from __future__ import annotations

import logging
from importlib.metadata import version

import pytest

from webapp.settings import ConfigError, Sources, load_settings, settings_from
from webapp.settings import sources as settings_sources
from webapp.settings.core import SETTINGS as SITE_SETTINGS
from webapp.settings.sources import RENAMED_SETTINGS as SHIPPED_RENAMES
from webapp.settings.sources import RenamedSetting

SECRET = "s" * 40
OTHER_SECRET = "o" * 40
URL = "https://example.com/auth"


@pytest.fixture(autouse=True)
def renamed(monkeypatch):
    """Pretend AUTH_URL was AUTH_BASE_URL, AUTH_SECRET was AUTH_KEY (both with their TOML
    keys), AUTH_TRUST_HOST was AUTH_TRUST_FORWARDED and AUTH_CONFIG was AUTH_CONFIG_FILE."""
    monkeypatch.setattr(
        settings_sources,
        "RENAMED_SETTINGS",
        (
            RenamedSetting("AUTH_BASE_URL", "AUTH_URL", 2, old_toml_key="base_url"),
            RenamedSetting("AUTH_KEY", "AUTH_SECRET", 2, old_toml_key="key"),
            RenamedSetting("AUTH_TRUST_FORWARDED", "AUTH_TRUST_HOST", 2),
            RenamedSetting("AUTH_CONFIG_FILE", "AUTH_CONFIG", 3),
        ),
    )


def settings(env, tmp_path):
    # Production settings need a database URL.
    return load_settings(
        {"DATABASE_URL": "postgresql://app@db.example/app", **env}, instance_path=tmp_path
    )


def warnings_of(caplog):
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "webapp.settings" and r.levelno == logging.WARNING
    ]


def test_an_old_name_works_and_is_warned_about_once(caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings({"AUTH_BASE_URL": URL, "AUTH_SECRET": SECRET}, tmp_path)
    assert conf.auth_url == URL
    assert warnings_of(caplog) == [
        "AUTH_BASE_URL is renamed AUTH_URL: the old name still works, with this warning, "
        "until release 2.0.0 removes it; rename it in your configuration"
    ]


def test_reading_an_old_name_twice_warns_once(caplog):
    sources = Sources.read({"AUTH_BASE_URL": URL}, None)
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        assert sources.get(SITE_SETTINGS["AUTH_URL"]) == URL
        assert sources.get(SITE_SETTINGS["AUTH_URL"]) == URL
    assert len(warnings_of(caplog)) == 1


def test_each_old_name_used_is_warned_about(caplog, tmp_path):
    env = {"AUTH_BASE_URL": URL, "AUTH_KEY": SECRET, "AUTH_TRUST_FORWARDED": "true"}
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings(env, tmp_path)
    assert conf.secret == SECRET and conf.trusted_proxies.hops == 1
    warned = warnings_of(caplog)
    assert len(warned) == 3
    for old, new in [
        ("AUTH_BASE_URL", "AUTH_URL"),
        ("AUTH_KEY", "AUTH_SECRET"),
        ("AUTH_TRUST_FORWARDED", "AUTH_TRUST_HOST"),
    ]:
        assert any(m.startswith(f"{old} is renamed {new}:") for m in warned)


def test_an_old_name_works_in_app_config(caplog, tmp_path):
    sources = Sources.of_app(
        {"AUTH_BASE_URL": URL, "AUTH_KEY": SECRET, "DATABASE_URL": "postgresql://app@db/app"},
        None,
        root_path=str(tmp_path),
        defaults={},
    )
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings_from(sources, instance_path=tmp_path)
    assert conf.auth_url == URL and conf.secret == SECRET
    assert len(warnings_of(caplog)) == 2


def test_an_old_auth_config_name_finds_the_file(caplog, tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(f'[auth]\nurl = "{URL}"\nsecret = "{SECRET}"\n')
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings({"AUTH_CONFIG_FILE": str(path)}, tmp_path)
    assert conf.config_path == str(path) and conf.auth_url == URL
    assert warnings_of(caplog) == [
        "AUTH_CONFIG_FILE is renamed AUTH_CONFIG: the old name still works, with this "
        "warning, until release 3.0.0 removes it; rename it in your configuration"
    ]


@pytest.mark.parametrize(
    "env",
    [
        {"AUTH_URL": URL, "AUTH_SECRET": SECRET},
        {"AUTH_URL": URL, "AUTH_BASE_URL": URL, "AUTH_SECRET": SECRET, "AUTH_KEY": SECRET},
    ],
    ids=["new name only", "both names, same value"],
)
def test_the_new_name_is_read_without_a_warning(env, caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings(env, tmp_path)
    assert conf.auth_url == URL and conf.secret == SECRET
    assert warnings_of(caplog) == []


def test_the_same_value_spelt_as_toml_and_as_text_is_no_conflict(caplog, tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text("[auth]\ntrust_host = true\n")
    env = {"AUTH_CONFIG": str(path), "AUTH_URL": URL, "AUTH_SECRET": SECRET}
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings({**env, "AUTH_TRUST_FORWARDED": "true"}, tmp_path)
    assert conf.trusted_proxies.hops == 1
    assert warnings_of(caplog) == []


def test_an_old_toml_key_works(caplog, tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(f'[auth]\nbase_url = "{URL}"\nkey = "{SECRET}"\n')
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings({"AUTH_CONFIG": str(path)}, tmp_path)
    assert conf.auth_url == URL and conf.secret == SECRET
    assert sorted(warnings_of(caplog)) == [
        "[auth] base_url is renamed [auth] url: the old name still works, with this warning, "
        "until release 2.0.0 removes it; rename it in your configuration",
        "[auth] key is renamed [auth] secret: the old name still works, with this warning, "
        "until release 2.0.0 removes it; rename it in your configuration",
    ]


def test_the_new_toml_key_wins_over_the_old_one_silently(caplog, tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(f'[auth]\nurl = "{URL}"\nbase_url = "{URL}"\nsecret = "{SECRET}"\n')
    with caplog.at_level(logging.WARNING, logger="webapp.settings"):
        conf = settings({"AUTH_CONFIG": str(path)}, tmp_path)
    assert conf.auth_url == URL
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    ("env", "toml", "both"),
    [
        ({"AUTH_SECRET": SECRET, "AUTH_KEY": OTHER_SECRET}, "", "AUTH_SECRET and AUTH_KEY"),
        ({"AUTH_KEY": OTHER_SECRET}, f'secret = "{SECRET}"', "[auth] secret and AUTH_KEY"),
        ({"AUTH_SECRET": SECRET}, f'key = "{OTHER_SECRET}"', "AUTH_SECRET and [auth] key"),
    ],
    ids=["environment", "new TOML key, old variable", "new variable, old TOML key"],
)
def test_both_names_set_to_different_values_stop_start_up(env, toml, both, tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(f"[auth]\n{toml}\n")
    with pytest.raises(ConfigError) as error:
        settings({"AUTH_CONFIG": str(path), "AUTH_URL": URL, **env}, tmp_path)
    message = str(error.value)
    assert message.startswith(f"{both} are both set, to different values:")
    assert "is an old name of AUTH_SECRET" in message
    assert SECRET not in message and OTHER_SECRET not in message


def test_the_warning_carries_no_value(caplog, tmp_path):
    """The old name may hold a secret: the warning names it, never what it is set to."""
    with caplog.at_level(logging.DEBUG):
        settings({"AUTH_URL": URL, "AUTH_KEY": SECRET}, tmp_path)
    [warning] = warnings_of(caplog)
    assert warning.startswith("AUTH_KEY is renamed AUTH_SECRET:")
    assert SECRET not in caplog.text
    assert all(SECRET not in str(r.args) for r in caplog.records)


def test_no_old_name_outlives_its_major_version():
    """Each real rename's old name goes at the next major release: an entry whose version
    has come must be removed (and with it, the old name)."""
    current_major = int(version("webapp-signin").split(".")[0])
    for renamed in SHIPPED_RENAMES:
        assert renamed.removed_in_major > current_major, renamed
        assert renamed.old_name != renamed.new_name, renamed
