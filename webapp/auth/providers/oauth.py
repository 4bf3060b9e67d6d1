"""OAuth 2 and OpenID Connect providers (kinds oidc, oauth, preset): sign-in and callback.

The flow is the authorization code flow with state, PKCE (S256) and, for OpenID Connect,
a nonce (spec §7). The callback checks everything a certified relying party checks before
anything is written: state, RFC 9207 ``iss``, the code exchange, the ID token (signature
and claims), userinfo ``sub``. Any failure is an ``AuthError``; nothing is stored.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from flask import url_for

from webapp.auth import oauth_checks, reauth, urls
from webapp.auth.accounts import resolve_user
from webapp.auth.client_auth import exchange_code
from webapp.auth.errors import AuthError
from webapp.auth.hooks import UserInfo
from webapp.auth.id_token import InvalidIDToken, validate
from webapp.auth.oidc_metadata import ProviderMetadata, ProviderUnavailable, get_json
from webapp.auth.providers import Outcome, Provider, Redirect, register_kind
from webapp.auth.providers.oauth_config import OAuthConfig, parse_config
from webapp.auth.sessions import current_session
from webapp.auth.signin import finish_signin
from webapp.settings import Settings

#: Parameters the flow sets itself; the same names on the POST URL are ignored.
_RESERVED_PARAMS = frozenset(
    {
        "response_type",
        "client_id",
        "redirect_uri",
        "state",
        "nonce",
        "code_challenge",
        "code_challenge_method",
        "response_mode",
        "callbackUrl",
        "csrfToken",
        "json",
    }
)


class OAuthProvider(Provider):
    """An OAuth 2 or OpenID Connect identity provider."""

    # form_post callbacks are cross-site POSTs by design; state protects them instead.
    callback_needs_csrf = False

    def __init__(self, config: OAuthConfig, conf: Settings) -> None:
        super().__init__(id=config.id, name=config.name)
        self.type = config.type
        self.config = config
        self.conf = conf
        self.metadata = (
            ProviderMetadata(
                config.issuer,
                conf,
                allow_insecure=config.allow_insecure,
                issuer_matches=_tenant_issuer_matches
                if config.preset and config.preset.tenant_issuer
                else None,
            )
            if config.type == "oidc" and config.issuer
            else None
        )

    @property
    def logo_url(self) -> str | None:
        logo = self.config.logo
        if logo is None:
            return None
        return logo if logo.startswith("/") else url_for("static", filename=logo)

    # -- the sign-in request ------------------------------------------------------------

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        """Send the browser to the authorization endpoint; keep the checks in cookies."""
        session = current_session()
        if (
            session is not None
            and not reauth.is_recent(session)
            and not reauth.has_method(session, self.id)
        ):
            # It would end in a link (see callback): ask for the fresh sign-in first.
            return Redirect(urls.origin() + reauth.confirm_url(f"/account/link/{self.id}"))
        endpoint = self._endpoint("authorization_endpoint", "OAuthSignin")
        cfg = self.config
        checks = oauth_checks.Checks(
            state=secrets.token_urlsafe(32) if "state" in cfg.checks else None,
            pkce=secrets.token_urlsafe(48) if "pkce" in cfg.checks else None,
            nonce=secrets.token_urlsafe(32) if "nonce" in cfg.checks else None,
            callback_url=callback_url,
        )
        params: dict[str, str] = {**cfg.authorization_params}
        # Query parameters on the POST URL (prompt=login, login_hint=…) reach the provider.
        params.update({k: v for k, v in query.items() if k not in _RESERVED_PARAMS})
        params.update(
            {
                "response_type": "code",
                "client_id": cfg.client.client_id,
                "redirect_uri": self._redirect_uri(),
            }
        )
        scope = params.get("scope", cfg.scope)
        if scope:
            params["scope"] = scope
        if checks.state is not None:
            params["state"] = checks.state
        if checks.pkce is not None:
            params["code_challenge"] = create_s256_code_challenge(checks.pkce)
            params["code_challenge_method"] = "S256"
        if checks.nonce is not None:
            params["nonce"] = checks.nonce
        if cfg.response_mode:
            params["response_mode"] = cfg.response_mode
        oauth_checks.store(self.id, checks, same_site=self._same_site())
        return Redirect(add_params_to_uri(endpoint, list(params.items())))

    # -- the callback -------------------------------------------------------------------

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        """Check the provider's answer, then sign the person in (or raise AuthError)."""
        cfg = self.config
        params = form if method == "POST" else args
        state = params.get("state") or None
        stored = oauth_checks.take(
            self.id, state if "state" in cfg.checks else None, same_site=self._same_site()
        )
        if params.get("error"):
            # The person declined, or the provider refused; its text goes to the log only.
            code = "AccessDenied" if params["error"] == "access_denied" else "Callback"
            raise AuthError(code, f"{self.id}: provider error {params['error'][:100]!r}")
        self._check_state(state, stored)
        self._check_iss(params.get("iss"))
        auth_code = params.get("code")
        if not auth_code:
            raise AuthError("OAuthCallback", f"{self.id}: no code in callback")

        token = self._exchange(auth_code, stored.pkce)
        profile, claims = self._profile(token, stored.nonce, form)
        subject, info = self._user_info(profile)
        session = current_session()
        if reauth.link_needs_confirmation(session, self.id, subject):
            # Linking a new method to an old session needs a fresh sign-in; nothing is written.
            return Redirect(urls.origin() + reauth.confirm_url(f"/account/link/{self.id}"))
        resolved = resolve_user(
            provider=self.id,
            provider_type=self.type,
            subject=subject,
            info=info,
            current_user_id=session.user.id if session else None,
            allow_email_linking=cfg.allow_email_linking,
            create_error="OAuthCreateAccount",
            tokens=_account_tokens(token),
        )
        sid = claims.get("sid")
        return Redirect(
            finish_signin(
                resolved,
                provider=self.id,
                callback_url=stored.callback_url,
                profile=profile,
                # Kept for provider-initiated logout; a sid that does not fit is not stored.
                provider_sid=sid if isinstance(sid, str) and len(sid) <= 255 else None,
            )
        )

    def _check_state(self, state: str | None, stored: oauth_checks.Checks) -> None:
        if "state" in self.config.checks and not (
            state and stored.state and hmac.compare_digest(state.encode(), stored.state.encode())
        ):
            raise AuthError("OAuthCallback", f"{self.id}: state missing, expired or wrong")
        if "pkce" in self.config.checks and stored.pkce is None:
            raise AuthError("OAuthCallback", f"{self.id}: PKCE verifier cookie missing")
        if "nonce" in self.config.checks and stored.nonce is None:
            raise AuthError("OAuthCallback", f"{self.id}: nonce cookie missing")

    def _check_iss(self, iss: str | None) -> None:
        """RFC 9207: an ``iss`` parameter must name our issuer; it must be there if promised."""
        if self.metadata is None:
            return
        advertised = (
            self._document("OAuthCallback").get("authorization_response_iss_parameter_supported")
            is True
        )
        if iss is None and not advertised:
            return
        expected = str(self._document("OAuthCallback")["issuer"])
        # Entra's common endpoint answers with the person's tenant in place of {tenantid}.
        pattern = re.escape(expected).replace(re.escape("{tenantid}"), "[0-9A-Za-z-]+")
        if iss is None or not re.fullmatch(pattern, iss):
            raise AuthError("OAuthCallback", f"{self.id}: iss {iss!r} is not our issuer")

    def _exchange(self, code: str, verifier: str | None) -> dict[str, Any]:
        endpoint = self._endpoint("token_endpoint", "OAuthCallback")
        try:
            return exchange_code(
                token_endpoint=endpoint,
                client=self.config.client,
                code=code,
                redirect_uri=self._redirect_uri(),
                code_verifier=verifier,
                conf=self.conf,
            )
        except ProviderUnavailable as exc:
            raise AuthError("OAuthCallback", f"{self.id}: {exc}") from exc

    def _profile(
        self, token: Mapping[str, Any], nonce: str | None, form: Mapping[str, str]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return the profile (ID token claims merged with userinfo) and the ID token claims."""
        cfg = self.config
        claims: dict[str, Any] = {}
        if self.metadata is not None:
            raw = token.get("id_token")
            if not isinstance(raw, str):
                raise AuthError("OAuthCallback", f"{self.id}: no id_token in token response")
            try:
                claims = validate(
                    raw,
                    keys=self._keys,
                    issuer=self._expected_issuer,
                    client_id=cfg.client.client_id,
                    nonce=nonce,
                    leeway=self.conf.id_token_leeway.total_seconds(),
                )
            except InvalidIDToken as exc:
                raise AuthError("OAuthCallback", f"{self.id}: ID token: {exc}") from exc
        profile = dict(claims)
        userinfo_endpoint = self._optional_endpoint("userinfo_endpoint", "OAuthCallback")

        def fetch(url: str) -> Any:
            return get_json(
                url,
                self.conf,
                allow_insecure=cfg.allow_insecure,
                headers={"Authorization": f"Bearer {token['access_token']}"},
            )

        try:
            if userinfo_endpoint is not None:
                userinfo = fetch(userinfo_endpoint)
                if not isinstance(userinfo, dict):
                    raise ProviderUnavailable("userinfo is not a JSON object")
                if claims and userinfo.get("sub") != claims["sub"]:
                    # OIDC Core §5.3.2: otherwise the answer may be another person's.
                    raise AuthError("OAuthCallback", f"{self.id}: userinfo sub mismatch")
                profile.update(userinfo)
            if cfg.preset and cfg.preset.profile_quirk:
                profile = cfg.preset.profile_quirk(profile, fetch, userinfo_endpoint, form)
        except ProviderUnavailable as exc:
            raise AuthError("OAuthCallback", f"{self.id}: {exc}") from exc
        return profile, claims

    def _user_info(self, profile: Mapping[str, Any]) -> tuple[str, UserInfo]:
        mapped = {key: _lookup(profile, path) for key, path in self.config.profile.items()}
        subject = mapped.get("sub")
        if isinstance(subject, int) and not isinstance(subject, bool):
            subject = str(subject)  # GitHub, Discord: numeric ids
        if not isinstance(subject, str) or not subject or len(subject) > 255:
            raise AuthError("OAuthCallback", f"{self.id}: profile has no usable subject")
        email = mapped.get("email")
        email = email.strip().lower() if isinstance(email, str) and "@" in email else None
        if email is not None and len(email) > 320:
            email = None
        return subject, UserInfo(
            email=email,
            name=_text(mapped.get("name"), 255),
            # Whole: accounts.picture_url drops a URL that is too long (a cut one is another).
            image=_text(mapped.get("image"), None),
            subject=subject,
            email_verified=mapped.get("email_verified") in (True, "true"),
        )

    # -- endpoints and keys -------------------------------------------------------------

    def _document(self, error_code: str) -> dict[str, Any]:
        assert self.metadata is not None
        try:
            return self.metadata.document()
        except ProviderUnavailable as exc:
            raise AuthError(error_code, f"{self.id}: discovery: {exc}") from exc

    def _optional_endpoint(self, name: str, error_code: str) -> str | None:
        """Return a configured endpoint, else the discovered one (None if neither)."""
        value: str | None = getattr(self.config, name)
        if value is None and self.metadata is not None:
            value = self._document(error_code).get(name)
        return value

    def _endpoint(self, name: str, error_code: str) -> str:
        value = self._optional_endpoint(name, error_code)
        if value is None:
            raise AuthError(error_code, f"{self.id}: no {name}")
        return value

    def _keys(self, kid: str | None) -> list[dict[str, Any]]:
        assert self.metadata is not None
        try:
            return self.metadata.keys(kid)
        except ProviderUnavailable as exc:
            raise InvalidIDToken(f"JWKS: {exc}") from exc

    def _expected_issuer(self, claims: Mapping[str, Any]) -> str:
        issuer = str(self._document("OAuthCallback")["issuer"])
        if "{tenantid}" in issuer:
            tid = claims.get("tid")
            # Entra's common endpoint: each tenant signs with its own issuer.
            return issuer.replace("{tenantid}", tid) if isinstance(tid, str) else "<no tid>"
        return issuer

    def _redirect_uri(self) -> str:
        return urls.auth_url(f"callback/{self.id}")

    def _same_site(self) -> str:
        # A form_post answer is a cross-site POST: Lax cookies would not come with it.
        return "None" if self.config.response_mode == "form_post" else "Lax"


def _tenant_issuer_matches(configured: str, found: str) -> bool:
    if configured == found:
        return True
    return "{tenantid}" in found and configured.split("/")[:3] == found.split("/")[:3]


def _lookup(profile: Mapping[str, Any], path: str | list[str]) -> Any:
    """Return the first present value among dotted ``path``s (``picture.data.url``)."""
    for candidate in [path] if isinstance(path, str) else path:
        value: Any = profile
        for part in candidate.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            return value
    return None


def _text(value: Any, limit: int | None) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _account_tokens(token: Mapping[str, Any]) -> dict[str, Any]:
    """The token response as account columns; a missing refresh token keeps the old one."""
    expires_at = token.get("expires_at")
    tokens: dict[str, Any] = {
        "access_token": token.get("access_token"),
        "id_token": token.get("id_token"),
        "token_type": token.get("token_type"),
        "scope": token.get("scope"),
        "session_state": token.get("session_state"),
        "expires_at": datetime.fromtimestamp(expires_at, UTC)
        if isinstance(expires_at, int | float)
        else None,
    }
    if token.get("refresh_token"):
        tokens["refresh_token"] = token["refresh_token"]
    return tokens


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    """Build a provider from its TOML table or ``AUTH_<PRESET>_*``; raise ConfigError."""
    return OAuthProvider(parse_config(entry), conf)


for _kind in ("oidc", "oauth", "preset"):
    register_kind(_kind, build)
