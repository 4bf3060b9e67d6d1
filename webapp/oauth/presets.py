"""Provider presets: each well-known provider as a small data entry, plus its real quirks.

A preset only supplies defaults; the TOML entry (or ``AUTH_<PRESET>_*``) overrides any of
them, which is also how tests point a preset at a local fake. Quirks are the places
where a provider departs from plain OAuth/OIDC; each is a function named for what it
fixes, with the reason beside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt

from webapp.core import jsonsafe
from webapp.core.clock import now_timestamp
from webapp.oauth.client_auth import PrivateKey
from webapp.oauth.metadata import ProviderUnavailable

#: ``fetch(url)``: GET ``url`` with the access token; returns the JSON body.
Fetch = Callable[[str], Any]
#: Adjusts the raw profile after userinfo: ``(profile, fetch, userinfo_endpoint, form)``.
ProfileQuirk = Callable[[dict[str, Any], Fetch, "str | None", Mapping[str, str]], dict[str, Any]]

#: Where the claims the app needs live in a profile; a list gives fallbacks in order.
OIDC_PROFILE: Mapping[str, str | list[str]] = {
    "sub": "sub",
    "email": "email",
    "email_verified": "email_verified",
    "name": ["name", "preferred_username", "nickname"],
    "image": "picture",
}


@dataclass(frozen=True)
class Preset:
    """Defaults for one well-known provider."""

    name: str
    type: str  # oidc | oauth
    #: Fixed issuer; None when each customer has their own (Keycloak, Okta…): then required.
    issuer: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    scope: str | None = None
    token_endpoint_auth_method: str = "client_secret_basic"
    authorization_params: Mapping[str, str] = field(default_factory=dict)
    response_mode: str | None = None
    profile: Mapping[str, str | list[str]] = field(default_factory=lambda: OIDC_PROFILE)
    profile_quirk: ProfileQuirk | None = None
    #: Discovery publishes ``{tenantid}`` in its issuer (Entra's multi-tenant endpoints).
    tenant_issuer: bool = False
    #: Builds the client secret for each exchange (Apple's signed JWT); needs a key file.
    signed_client_secret: bool = False
    #: Extra fields this preset accepts in the TOML entry.
    extra_fields: tuple[str, ...] = ()


def github_emails(
    profile: dict[str, Any], fetch: Fetch, userinfo_endpoint: str | None, form: Mapping[str, str]
) -> dict[str, Any]:
    """GitHub's /user has only the *public* e-mail, often null, and no verified flag.

    Ask /user/emails (needs the user:email scope): keep the profile's address if GitHub
    lists it as verified, else take the primary verified one. Unverified addresses are
    kept as unverified, so they can never link to another user's account.
    """
    base = (userinfo_endpoint or "https://api.github.com/user").rstrip("/")
    try:
        emails = fetch(base + "/emails")
    except ProviderUnavailable:
        # Scope not granted (403/404) or GitHub hiccup: sign in without a verified address.
        emails = []
    listed = [e for e in emails if isinstance(e, dict)] if isinstance(emails, list) else []
    verified = {str(e.get("email")).lower() for e in listed if e.get("verified") is True}
    current = profile.get("email")
    if isinstance(current, str) and current.lower() in verified:
        return {**profile, "email_verified": True}
    primary = next(
        (e["email"] for e in listed if e.get("primary") and e.get("verified") and e.get("email")),
        None,
    )
    if primary is not None:
        return {**profile, "email": primary, "email_verified": True}
    return {**profile, "email_verified": False}


def bitbucket_emails(
    profile: dict[str, Any], fetch: Fetch, userinfo_endpoint: str | None, form: Mapping[str, str]
) -> dict[str, Any]:
    """Bitbucket's /2.0/user has no e-mail at all: take the primary confirmed one."""
    base = (userinfo_endpoint or "https://api.bitbucket.org/2.0/user").rstrip("/")
    try:
        body = fetch(base + "/emails")
    except ProviderUnavailable:
        body = {}  # the email scope was not granted: sign in without an address
    values = body.get("values", []) if isinstance(body, dict) else []
    primary = next(
        (
            e.get("email")
            for e in values
            if isinstance(e, dict) and e.get("is_primary") and e.get("is_confirmed")
        ),
        None,
    )
    return {**profile, "email": primary, "email_verified": primary is not None}


def apple_user_name(
    profile: dict[str, Any], fetch: Fetch, userinfo_endpoint: str | None, form: Mapping[str, str]
) -> dict[str, Any]:
    """Apple posts the person's name in a ``user`` form field, on the first sign-in only.

    Only the name is taken from it: the field is not signed, so an e-mail address in it
    could be forged by the person signing in; the address comes from the ID token only.
    Apple also sends ``email_verified`` as the string "true".
    """
    adjusted = dict(profile)
    adjusted["email_verified"] = profile.get("email_verified") in (True, "true")
    try:
        user = jsonsafe.loads(form.get("user", "") or "{}")
    except ValueError:
        user = {}
    name = user.get("name") if isinstance(user, dict) else None
    if isinstance(name, dict):
        full = " ".join(
            str(name[part]) for part in ("firstName", "lastName") if isinstance(name.get(part), str)
        ).strip()
        if full:
            adjusted["name"] = full[:255]
    return adjusted


def discord_avatar(
    profile: dict[str, Any], fetch: Fetch, userinfo_endpoint: str | None, form: Mapping[str, str]
) -> dict[str, Any]:
    """Discord gives an avatar hash, not a URL; ``verified`` is its e-mail verified flag."""
    avatar = profile.get("avatar")
    image = (
        f"https://cdn.discordapp.com/avatars/{profile.get('id')}/{avatar}.png"
        if isinstance(avatar, str) and avatar.isalnum()
        else None
    )
    return {**profile, "image": image}


def apple_client_secret(
    *, team_id: str, key_id: str, client_id: str, key: PrivateKey, audience: str, lifetime: int
) -> str:
    """Apple's client secret: an ES256 JWT signed with the team's key (short-lived here)."""
    now = int(now_timestamp())
    return jwt.encode(
        {"alg": "ES256", "kid": key_id},
        {"iss": team_id, "iat": now, "exp": now + lifetime, "aud": audience, "sub": client_id},
        key,
        algorithms=["ES256"],
    )


def entra_issuer(tenant: str) -> str:
    return f"https://login.microsoftonline.com/{tenant}/v2.0"


PRESETS: dict[str, Preset] = {
    "github": Preset(
        name="GitHub",
        type="oauth",
        authorization_endpoint="https://github.com/login/oauth/authorize",
        token_endpoint="https://github.com/login/oauth/access_token",
        userinfo_endpoint="https://api.github.com/user",
        scope="read:user user:email",
        profile={
            "sub": "id",
            "email": "email",
            "email_verified": "email_verified",
            "name": ["name", "login"],
            "image": "avatar_url",
        },
        profile_quirk=github_emails,
    ),
    "google": Preset(
        name="Google",
        type="oidc",
        issuer="https://accounts.google.com",
    ),
    "gitlab": Preset(
        name="GitLab",
        type="oidc",
        issuer="https://gitlab.com",
    ),
    "microsoft-entra-id": Preset(
        name="Microsoft",
        type="oidc",
        issuer=entra_issuer("common"),
        tenant_issuer=True,
        extra_fields=("tenant_id",),
    ),
    "apple": Preset(
        name="Apple",
        type="oidc",
        issuer="https://appleid.apple.com",
        scope="openid name email",
        response_mode="form_post",
        token_endpoint_auth_method="client_secret_post",
        profile_quirk=apple_user_name,
        signed_client_secret=True,
        extra_fields=("team_id", "key_id"),
    ),
    "discord": Preset(
        name="Discord",
        type="oauth",
        authorization_endpoint="https://discord.com/oauth2/authorize",
        token_endpoint="https://discord.com/api/oauth2/token",
        userinfo_endpoint="https://discord.com/api/users/@me",
        scope="identify email",
        profile={
            "sub": "id",
            "email": "email",
            "email_verified": "verified",
            "name": ["global_name", "username"],
            "image": "image",
        },
        profile_quirk=discord_avatar,
    ),
    "slack": Preset(name="Slack", type="oidc", issuer="https://slack.com"),
    "keycloak": Preset(name="Keycloak", type="oidc"),
    "okta": Preset(name="Okta", type="oidc"),
    "auth0": Preset(name="Auth0", type="oidc"),
    "authentik": Preset(name="authentik", type="oidc"),
    "zitadel": Preset(name="ZITADEL", type="oidc"),
    "cognito": Preset(name="Amazon Cognito", type="oidc"),
    "twitch": Preset(
        name="Twitch",
        type="oidc",
        issuer="https://id.twitch.tv/oauth2",
        scope="openid user:read:email",
        token_endpoint_auth_method="client_secret_post",
        # Twitch puts e-mail and picture in the ID token only when asked by name.
        authorization_params={
            "claims": json.dumps(
                {
                    "id_token": {
                        "email": None,
                        "email_verified": None,
                        "picture": None,
                        "preferred_username": None,
                    }
                }
            )
        },
    ),
    "linkedin": Preset(
        name="LinkedIn",
        type="oidc",
        issuer="https://www.linkedin.com/oauth",
        token_endpoint_auth_method="client_secret_post",
    ),
    "facebook": Preset(
        name="Facebook",
        type="oauth",
        authorization_endpoint="https://www.facebook.com/v19.0/dialog/oauth",
        token_endpoint="https://graph.facebook.com/v19.0/oauth/access_token",
        userinfo_endpoint="https://graph.facebook.com/me?fields=id,name,email,picture",
        scope="email public_profile",
        token_endpoint_auth_method="client_secret_post",
        profile={"sub": "id", "email": "email", "name": "name", "image": "picture.data.url"},
    ),
    "twitter": Preset(
        name="X",
        type="oauth",
        authorization_endpoint="https://x.com/i/oauth2/authorize",
        token_endpoint="https://api.x.com/2/oauth2/token",
        userinfo_endpoint="https://api.x.com/2/users/me?user.fields=profile_image_url",
        scope="users.read tweet.read offline.access",
        # X gives no e-mail address through OAuth 2.
        profile={
            "sub": "data.id",
            "name": ["data.name", "data.username"],
            "image": "data.profile_image_url",
        },
    ),
    "bitbucket": Preset(
        name="Bitbucket",
        type="oauth",
        authorization_endpoint="https://bitbucket.org/site/oauth2/authorize",
        token_endpoint="https://bitbucket.org/site/oauth2/access_token",
        userinfo_endpoint="https://api.bitbucket.org/2.0/user",
        scope="account email",
        profile={
            "sub": "uuid",
            "email": "email",
            "email_verified": "email_verified",
            "name": ["display_name", "username"],
            "image": "links.avatar.href",
        },
        profile_quirk=bitbucket_emails,
    ),
}
