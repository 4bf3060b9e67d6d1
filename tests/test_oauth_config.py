"""OAuth/OIDC provider configuration: every mistake stops start-up naming provider and field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from joserfc.jwk import ECKey, RSAKey

from webapp.providers import providers
from webapp.settings import ConfigError

BASE = {
    "id": "corp",
    "type": "oidc",
    "name": "Corp SSO",
    "issuer": "https://sso.example.com",
    "client_id": "webapp",
    "client_secret": "s3cret",
}

#: A plain OAuth 2 provider: no discovery, so it must name what it uses.
PLAIN_OAUTH = {
    "type": "oauth",
    "issuer": None,
    "authorization_endpoint": "https://sso.example.com/authorize",
    "token_endpoint": "https://sso.example.com/token",
    "userinfo_endpoint": "https://sso.example.com/userinfo",
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"client_id": None}, "provider 'corp': client_id is required"),
        ({"issuer": None}, "provider 'corp': issuer is required"),
        ({"client_secret": None}, "provider 'corp': client_secret"),
        ({"token_endpoint_auth_method": "magic"}, "provider 'corp': token_endpoint_auth_method"),
        (
            {"token_endpoint_auth_method": "private_key_jwt"},
            "provider 'corp': client_private_key_file is required",
        ),
        (
            {"client_private_key_file": "missing.pem"},
            "provider 'corp': client_private_key_file: cannot read",
        ),
        ({"issuer": "http://sso.example.com"}, "provider 'corp': issuer must be an https:// URL"),
        ({"preset": "myspace"}, "provider 'corp': unknown preset 'myspace'"),
        ({"preset": "github"}, "provider 'corp': type must be 'oauth' for preset 'github'"),
        ({"client_secret_file": "x"}, "provider 'corp': unknown field 'client_secret_file'"),
        ({"checks": ["nonce"]}, "provider 'corp': checks must include state or pkce"),
        ({"checks": ["state", "csrf"]}, "provider 'corp': checks must be a list"),
        ({"response_mode": "fragment"}, "provider 'corp': response_mode"),
        ({"type": "oauth", "issuer": None}, "provider 'corp': authorization_endpoint is required"),
        (
            {
                "type": "oauth",
                "checks": ["state", "nonce"],
                "authorization_endpoint": "https://a",
                "token_endpoint": "https://t",
                "userinfo_endpoint": "https://u",
            },
            "provider 'corp': the nonce check needs type oidc",
        ),
        ({"profile": {"email": "mail"}}, "provider 'corp': profile must map sub"),
        (
            {"allow_dangerous_email_account_linking": "yes"},
            "provider 'corp': allow_dangerous_email_account_linking",
        ),
        (
            {"client_secret_env": "NOT_SET_ANYWHERE", "client_secret": None},
            "provider 'corp': client_secret_env names 'NOT_SET_ANYWHERE'",
        ),
        ({"logout": "front-channel"}, "provider 'corp': logout must be rp-initiated"),
        ({"logout": True}, "provider 'corp': logout must be a non-empty string"),
        (
            {"backchannel_logout": "yes"},
            "provider 'corp': backchannel_logout must be true or false",
        ),
        ({"device_flow": 1}, "provider 'corp': device_flow must be true or false"),
        (
            {"end_session_endpoint": "http://sso.example.com/logout"},
            "provider 'corp': end_session_endpoint must be an https:// URL",
        ),
        (
            {"device_authorization_endpoint": "ftp://sso.example.com/device"},
            "provider 'corp': device_authorization_endpoint must be an https:// URL",
        ),
        (
            {**PLAIN_OAUTH, "backchannel_logout": True},
            "provider 'corp': backchannel_logout needs type oidc",
        ),
        (
            {**PLAIN_OAUTH, "logout": "rp-initiated"},
            "provider 'corp': end_session_endpoint is required for type oauth",
        ),
        (
            {**PLAIN_OAUTH, "device_flow": True},
            "provider 'corp': device_authorization_endpoint is required for type oauth",
        ),
    ],
)
def test_configuration_errors_name_provider_and_field(
    make_oauth_app: Callable[..., Flask], change: dict[str, Any], message: str
) -> None:
    entry = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        make_oauth_app([entry])


def test_unreadable_or_wrong_key_file(make_oauth_app: Callable[..., Flask], tmp_path: Path) -> None:
    (tmp_path / "not-a-key.pem").write_text("hello")
    with pytest.raises(ConfigError, match="provider 'corp': client_private_key_file: .* is not"):
        make_oauth_app(
            [
                {
                    **BASE,
                    "token_endpoint_auth_method": "private_key_jwt",
                    "client_private_key_file": str(tmp_path / "not-a-key.pem"),
                }
            ]
        )
    public = RSAKey.generate_key(2048).as_dict(private=False)
    (tmp_path / "public.jwk").write_text(json.dumps(public))
    with pytest.raises(ConfigError, match="must hold an RSA or EC private key"):
        make_oauth_app(
            [
                {
                    **BASE,
                    "token_endpoint_auth_method": "private_key_jwt",
                    "client_private_key_file": str(tmp_path / "public.jwk"),
                }
            ]
        )


def test_key_file_is_relative_to_the_toml_file(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    (tmp_path / "corp.pem").write_bytes(ECKey.generate_key("P-256").as_pem(private=True))
    app = make_oauth_app(
        [
            {
                **BASE,
                "token_endpoint_auth_method": "private_key_jwt",
                "client_private_key_file": "corp.pem",
            }
        ]
    )
    with app.app_context():
        assert providers()["corp"].config.client.private_key is not None  # type: ignore[attr-defined]


def test_http_issuer_on_loopback_or_when_allowed(make_oauth_app: Callable[..., Flask]) -> None:
    loopback = make_oauth_app([{**BASE, "issuer": "http://127.0.0.1:8080/realms/dev"}])
    with loopback.app_context():
        config = providers()["corp"].config  # type: ignore[attr-defined]
        assert (config.issuer, config.allow_insecure) == ("http://127.0.0.1:8080/realms/dev", False)
    internal = {**BASE, "issuer": "http://sso.internal"}
    with pytest.raises(ConfigError, match="^provider 'corp': issuer must be an https:// URL"):
        make_oauth_app([internal])
    allowed = make_oauth_app([{**internal, "allow_insecure": True}])
    with allowed.app_context():
        config = providers()["corp"].config  # type: ignore[attr-defined]
        assert (config.issuer, config.allow_insecure) == ("http://sso.internal", True)


def test_client_secret_from_the_environment(make_oauth_app: Callable[..., Flask]) -> None:
    entry = {k: v for k, v in BASE.items() if k != "client_secret"}
    app = make_oauth_app([{**entry, "client_secret_env": "CORP_SECRET"}], CORP_SECRET="from-env")
    with app.app_context():
        assert providers()["corp"].config.client.secret == "from-env"  # type: ignore[attr-defined]


def test_a_provider_that_is_down_does_not_stop_start_up(
    make_oauth_app: Callable[..., Flask],
) -> None:
    app = make_oauth_app([{**BASE, "issuer": "http://127.0.0.1:9/nothing-here"}])
    assert app.test_client().get("/auth/providers").json["corp"]["type"] == "oidc"


def test_provider_logout_and_device_flow_keys_are_read(
    make_oauth_app: Callable[..., Flask],
) -> None:
    app = make_oauth_app(
        [
            {**BASE, "logout": "rp-initiated", "backchannel_logout": True, "device_flow": True},
            {
                **{k: v for k, v in BASE.items() if k != "issuer"},
                **{k: v for k, v in PLAIN_OAUTH.items() if v is not None},
                "id": "plain",
                "logout": "rp-initiated",
                "end_session_endpoint": "https://sso.example.com/logout",
                "device_flow": True,
                "device_authorization_endpoint": "https://sso.example.com/device",
            },
            {**BASE, "id": "quiet"},
        ]
    )
    with app.app_context():
        corp, plain, quiet = (providers()[p].config for p in ("corp", "plain", "quiet"))
    assert (corp.logout, corp.backchannel_logout, corp.device_flow) == ("rp-initiated", True, True)
    # Discovered at use for an OpenID Connect provider; named for a plain OAuth one.
    assert corp.end_session_endpoint is None and corp.device_authorization_endpoint is None
    assert plain.end_session_endpoint == "https://sso.example.com/logout"
    assert plain.device_authorization_endpoint == "https://sso.example.com/device"
    # All off unless asked for.
    assert (quiet.logout, quiet.backchannel_logout, quiet.device_flow) == (None, False, False)
