"""What a provider's table becomes: ``OAuthConfig``, read by the rest of the app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webapp.oauth.client_auth import ClientCredentials
from webapp.oauth.presets import OIDC_PROFILE, Preset

#: How a bearer token of this provider is checked: at its introspection endpoint (RFC 7662)
#: or locally, as a signed JWT access token (RFC 9068) against its JWKS.
BEARER_MODES = ("introspection", "jwt")
#: Whether an introspection answer must say ``token_type`` Bearer (``required``), or may
#: leave it out (``optional``: for a provider that never introspects a refresh token as
#: active, such as django-oauth-toolkit).
BEARER_TOKEN_TYPES = ("required", "optional")
#: What signing out here does at the provider: nothing (None), or OpenID Connect
#: RP-Initiated Logout 1.0 (the browser goes to its end_session_endpoint).
LOGOUT_MODES = ("rp-initiated",)


@dataclass(frozen=True)
class OAuthConfig:
    """One provider's validated configuration."""

    id: str
    name: str
    type: str  # oidc | oauth
    client: ClientCredentials
    scope: str
    checks: frozenset[str]
    issuer: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    revocation_endpoint: str | None = None
    introspection_endpoint: str | None = None
    #: Revoke the account's tokens at the provider when a session it made signs out.
    revoke_on_signout: bool = False
    end_session_endpoint: str | None = None
    #: ``"rp-initiated"``: signing out of a session this provider made also signs the
    #: person out there (its end_session_endpoint). None: only here.
    logout: str | None = None
    #: Accept OpenID Connect Back-Channel Logout tokens at ``backchannel-logout/<id>``.
    backchannel_logout: bool = False
    device_authorization_endpoint: str | None = None
    #: Offer sign-in with the device authorization grant (RFC 8628) at ``device``.
    device_flow: bool = False
    #: Accept the ID token's ``amr`` (mfa, hwk, otp, …) as our second factor (oidc only).
    trust_provider_mfa: bool = False
    #: How ``Authorization: Bearer`` tokens from this provider are checked (None: refused).
    bearer_tokens: str | None = None
    #: What a bearer token's ``aud`` (or introspected ``client_id``) must name; default
    #: our client id.
    bearer_token_audiences: tuple[str, ...] = ()
    #: See BEARER_TOKEN_TYPES (introspection only).
    bearer_token_type: str = "required"
    #: The claim of an introspection answer or JWT access token that holds the account's
    #: subject (the ``sub`` of the person's ID tokens).
    bearer_subject_claim: str = "sub"
    authorization_params: Mapping[str, str] = field(default_factory=dict)
    response_mode: str | None = None
    profile: Mapping[str, str | list[str]] = field(default_factory=lambda: OIDC_PROFILE)
    allow_email_linking: bool = False
    allow_insecure: bool = False
    logo: str | None = None
    preset: Preset | None = None
    #: The e-mail domains the sign-in page sends here (docs/how-to/sso-by-domain.md); an
    #: address counts as verified only as ``email_verified`` says, whatever its domain.
    domains: frozenset[str] = frozenset()
    #: The provider is the only way in for addresses of ``domains``.
    enforce_domain: bool = False
