"""Provider presets: each builds from the environment, shows with its logo, and the GitHub,
Apple and Entra quirks work against local fakes that speak their APIs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from joserfc import jwt
from joserfc.jwk import ECKey

from webapp.oauth.presets import PRESETS
from webapp.storage.db import db
from webapp.storage.models import Account, User

from .support.oauth import Browser, FakeIdP, FakeRequest, error_of, fake_idp

STATIC = Path(__file__).resolve().parent.parent / "webapp" / "static"


@pytest.fixture
def fake() -> Iterator[FakeIdP]:
    with fake_idp() as provider:
        yield provider


def one(app: Flask, model: Any) -> Any:
    with app.app_context():
        row = db.session.execute(sa.select(model)).scalar_one()
        db.session.expunge(row)
        return row


def preset_env(preset_id: str) -> dict[str, str]:
    prefix = "AUTH_" + preset_id.upper().replace("-", "_")
    env = {f"{prefix}_ID": f"{preset_id}-client", f"{prefix}_SECRET": "s3cret"}
    if PRESETS[preset_id].type == "oidc" and PRESETS[preset_id].issuer is None:
        env[f"{prefix}_ISSUER"] = f"https://{preset_id}.example.com/realm"
    return env


def test_every_preset_is_enabled_from_the_environment_with_name_and_logo(
    make_app: Callable[..., Flask],
) -> None:
    env: dict[str, str] = {}
    for preset_id in PRESETS:
        env.update(preset_env(preset_id))
    app = make_app(**env)
    listed = app.test_client().get("/auth/providers").json
    page = app.test_client().get("/auth/signin").get_data(as_text=True)
    for preset_id, preset in PRESETS.items():
        assert listed[preset_id]["type"] == preset.type
        assert listed[preset_id]["callbackUrl"] == f"http://localhost/auth/callback/{preset_id}"
        assert f"Sign in with {preset.name}" in page
        assert f'src="/static/providers/{preset_id}.svg"' in page
        assert (STATIC / "providers" / f"{preset_id}.svg").read_text().startswith("<svg")
    assert "http" not in "".join(
        line for line in page.splitlines() if "<img" in line and "/static/" not in line
    )


def test_preset_without_its_issuer_names_the_field(make_app: Callable[..., Flask]) -> None:
    from webapp.settings import ConfigError

    with pytest.raises(ConfigError, match=r"provider 'keycloak': issuer is required"):
        make_app(AUTH_KEYCLOAK_ID="webapp", AUTH_KEYCLOAK_SECRET="s")


# -- GitHub: the verified primary e-mail from /user/emails -------------------------------


def github_fake(
    fake: FakeIdP, profile: dict[str, Any], emails: list[dict[str, Any]] | None
) -> None:
    fake.oidc = False

    def api(payload: Any) -> Callable[[FakeRequest], tuple[int, dict[str, str], Any]]:
        def answer(request: FakeRequest) -> tuple[int, dict[str, str], Any]:
            if not request.headers.get("Authorization", "").startswith("Bearer at-"):
                return 401, {}, {"message": "Requires authentication"}
            if payload is None:  # the person did not grant the user:email scope
                return 404, {}, {"message": "Not Found"}
            return 200, {}, payload

        return answer

    fake.routes["/user"] = api(profile)
    fake.routes["/user/emails"] = api(emails)


def github_config(fake: FakeIdP) -> dict[str, Any]:
    return {
        "id": "github",
        "type": "oauth",
        "preset": "github",
        "client_id": "gh-client",
        "client_secret": "gh-secret",
        "authorization_endpoint": fake.issuer + "/authorize",
        "token_endpoint": fake.issuer + "/token",
        "userinfo_endpoint": fake.issuer + "/user",
    }


EMAILS = [
    {"email": "old@example.com", "primary": False, "verified": True},
    {"email": "Octo@Example.com", "primary": True, "verified": True},
    {"email": "public@example.com", "primary": False, "verified": False},
]


@pytest.mark.parametrize(
    ("public_email", "emails", "expected"),
    [
        (None, EMAILS, ("octo@example.com", True)),
        ("old@example.com", EMAILS, ("old@example.com", True)),
        # A verified primary address beats an unverified public one.
        ("public@example.com", EMAILS, ("octo@example.com", True)),
        ("public@example.com", EMAILS[2:], ("public@example.com", False)),
        (None, [{"email": "x@example.com", "primary": True, "verified": False}], (None, False)),
        ("public@example.com", None, ("public@example.com", False)),
    ],
)
def test_github_email_quirk(
    fake: FakeIdP,
    make_oauth_app: Callable[..., Flask],
    public_email: str | None,
    emails: list[dict[str, Any]] | None,
    expected: tuple[Any, bool],
) -> None:
    github_fake(
        fake,
        {
            "id": 583231,
            "login": "octocat",
            "name": None,
            "email": public_email,
            "avatar_url": "https://avatars.example/u/583231",
        },
        emails,
    )
    app = make_oauth_app([github_config(fake)])
    assert error_of(Browser(app.test_client()).sign_in("github")) is None
    user, account = one(app, User), one(app, Account)
    assert (user.email, user.email_verified is not None) == expected
    assert user.name == "octocat" and user.image == "https://avatars.example/u/583231"
    assert (account.type, account.provider_account_id) == ("oauth", "583231")
    token_request = next(r for r in fake.requests if r.path == "/token")
    assert token_request.headers["Accept"] == "application/json"  # else GitHub answers a form
    assert fake.hits["/user/emails"] == 1


# -- Apple: form_post, a signed client secret, the name only on the first sign-in ---------


@pytest.fixture
def apple(fake: FakeIdP, tmp_path: Path) -> Iterator[tuple[FakeIdP, dict[str, Any], ECKey]]:
    key = ECKey.generate_key("P-256")
    (tmp_path / "AuthKey_KEY123.p8").write_bytes(key.as_pem(private=True))
    config = {
        "id": "apple",
        "type": "oidc",
        "preset": "apple",
        "client_id": "com.example.web",
        "issuer": fake.issuer,
        "team_id": "TEAM123",
        "key_id": "KEY123",
        "client_private_key_file": str(tmp_path / "AuthKey_KEY123.p8"),
    }
    fake.client_id = "com.example.web"
    fake.claims = {
        "sub": "001234.abcd",
        "email": "x7@privaterelay.appleid.com",
        "email_verified": "true",
        "is_private_email": "true",
    }
    fake.discovery.pop("userinfo_endpoint")  # Apple has none
    yield fake, config, key


def apple_sign_in(app: Flask, user_field: dict[str, Any] | None) -> Any:
    browser = Browser(app.test_client())
    start = browser.start("apple")
    assert start.status_code == 302
    for cookie in [c for c in start.headers.getlist("Set-Cookie") if c.startswith("auth.")]:
        # Apple's answer is a cross-site POST: only SameSite=None cookies come with it.
        assert "SameSite=None" in cookie and "Secure" in cookie
    answer = browser.idp.get(start.headers["Location"], timeout=10).json()
    fields = dict(answer["fields"])
    if user_field is not None:
        fields["user"] = json.dumps(user_field)
    assert answer["action"] == "http://localhost/auth/callback/apple"
    return browser.client.post(answer["action"], data=fields)


def test_apple_form_post_signed_secret_and_first_time_name(
    apple: tuple[FakeIdP, dict[str, Any], ECKey], make_oauth_app: Callable[..., Flask]
) -> None:
    fake, config, key = apple
    app = make_oauth_app([config])
    first = apple_sign_in(
        app, {"name": {"firstName": "Ann", "lastName": "Apple"}, "email": "forged@example.com"}
    )
    assert error_of(first) is None
    user = one(app, User)
    # The name comes from Apple's one-time form field; the address only from the ID token.
    assert (user.name, user.email) == ("Ann Apple", "x7@privaterelay.appleid.com")
    assert user.email_verified is not None

    token_request = next(r for r in fake.requests if r.path == "/token")
    secret = token_request.form["client_secret"]
    decoded = jwt.decode(secret, key, algorithms=["ES256"])
    assert decoded.header["kid"] == "KEY123"
    claims = decoded.claims
    assert (claims["iss"], claims["sub"], claims["aud"]) == (
        "TEAM123",
        "com.example.web",
        fake.issuer,
    )
    assert 0 < claims["exp"] - claims["iat"] <= 300 and claims["iat"] <= time.time() + 1

    # Later sign-ins: no name field, and Apple may leave the address out.
    fake.claims["email"] = None
    fake.claims["email_verified"] = None
    assert error_of(apple_sign_in(app, None)) is None
    again = one(app, User)
    assert (again.id, again.name, again.email) == (user.id, "Ann Apple", user.email)


# -- Microsoft Entra ID: the multi-tenant issuer -----------------------------------------


@pytest.mark.parametrize(("tid", "iss_tenant", "ok"), [("t-1", "t-1", True), ("t-1", "t-2", False)])
def test_entra_multi_tenant_issuer(
    fake: FakeIdP, make_oauth_app: Callable[..., Flask], tid: str, iss_tenant: str, ok: bool
) -> None:
    template = fake.issuer + "/{tenantid}/v2.0"
    fake.discovery["issuer"] = template
    fake.routes["/common/v2.0/.well-known/openid-configuration"] = lambda r: (
        200,
        {},
        fake.discovery,
    )
    fake.claims = {"iss": template.replace("{tenantid}", iss_tenant), "tid": tid}
    fake.iss_param = template.replace("{tenantid}", tid)
    app = make_oauth_app(
        [
            {
                "id": "microsoft-entra-id",
                "type": "oidc",
                "preset": "microsoft-entra-id",
                "client_id": fake.client_id,
                "client_secret": "s",
                "issuer": fake.issuer + "/common/v2.0",
            }
        ]
    )
    response = Browser(app.test_client()).sign_in("microsoft-entra-id")
    assert error_of(response) == (None if ok else "OAuthCallback")
