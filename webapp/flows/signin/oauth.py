"""OAuth 2 / OpenID Connect sign-in: send the browser to the provider, check what comes back.

The authorization code flow with state, PKCE (S256) and, for OpenID Connect, a nonce, each
kept in a cookie (``oauth.checks``). The callback checks everything a certified relying
party checks before anything is written: state, RFC 9207 ``iss``, the code exchange, the
ID token (signature and claims), userinfo ``sub``. Any failure is an ``AuthError``
(``OAuthSignin`` before the browser leaves, ``OAuthCallback`` after); nothing is stored.
Linking a new identity to an old session needs a fresh sign-in first (``reauth``).

A callback's code is sent to the provider in the app's name, and the check cookies a
client got once can come back with any number of made-up codes: exchanges are counted per
client address before the provider is asked (``AUTH_OAUTH_IP_LIMIT``), and one that
succeeds gives its count back.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from webapp.audit import throttles, trail
from webapp.browser_state import oauth_checks
from webapp.core.hooks import UserInfo
from webapp.core.redirects import is_safe_callback_url
from webapp.errors import AuthError
from webapp.flows import linking
from webapp.flows.signin.finish import finish_signin
from webapp.flows.signin.identity import account_columns, resolve_user
from webapp.mail.email_addresses import address_or_none
from webapp.oauth.client import OAuthClient
from webapp.oauth.id_token import InvalidIDToken, RefusedAlgorithm, validate
from webapp.oauth.metadata import ProviderUnavailable
from webapp.second_factor.verification import MFA
from webapp.sessions.store import ProviderSession, current_session
from webapp.settings import current_settings

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

T = TypeVar("T")


def start_oauth_signin(
    client: OAuthClient, *, query: Mapping[str, str], callback_url: str | None
) -> str:
    """Return the provider's authorization URL; queue the checks' cookie.

    Query parameters of the sign-in request (``prompt=login``, ``login_hint=…``) reach the
    provider. With a session present the sign-in is a link (``webapp.flows.linking``): an
    old session with no account at this provider gets the confirmation page instead.
    """
    confirm = linking.confirmation_before_leaving(current_session(), client.id)
    if confirm is not None:
        return confirm
    endpoint = _required(client, "authorization_endpoint", "OAuthSignin")
    cfg = client.config
    stored = oauth_checks.Checks(
        state=secrets.token_urlsafe(32) if "state" in cfg.checks else None,
        pkce=secrets.token_urlsafe(48) if "pkce" in cfg.checks else None,
        nonce=secrets.token_urlsafe(32) if "nonce" in cfg.checks else None,
        # Only a URL that would be followed is kept: an unsafe or over-long one (the
        # fallback replaces it anyway) must not swell the cookie past what browsers keep.
        callback_url=callback_url if is_safe_callback_url(callback_url) else None,
    )
    params: dict[str, str] = {**cfg.authorization_params}
    params.update({k: v for k, v in query.items() if k not in _RESERVED_PARAMS})
    params.update(
        {
            "response_type": "code",
            "client_id": cfg.client.client_id,
            "redirect_uri": client.redirect_uri(),
        }
    )
    scope = params.get("scope", cfg.scope)
    if scope:
        params["scope"] = scope
    if stored.state is not None:
        params["state"] = stored.state
    if stored.pkce is not None:
        params["code_challenge"] = create_s256_code_challenge(stored.pkce)
        params["code_challenge_method"] = "S256"
    if stored.nonce is not None:
        params["nonce"] = stored.nonce
    if cfg.response_mode:
        params["response_mode"] = cfg.response_mode
    oauth_checks.store(client.id, stored, same_site=client.same_site())
    return str(add_params_to_uri(endpoint, list(params.items())))


def complete_oauth_callback(
    client: OAuthClient,
    *,
    method: str,
    args: Mapping[str, str],
    form: Mapping[str, str],
    client_address: str | None,
) -> str:
    """Check the provider's answer, sign the person in; return where the browser goes.
    Code exchanges are counted against ``client_address``'s allowance."""
    cfg = client.config
    params = form if method == "POST" else args
    state = params.get("state") or None
    stored = oauth_checks.take(
        client.id, state if "state" in cfg.checks else None, same_site=client.same_site()
    )
    if params.get("error"):
        # The person declined, or the provider refused; its text goes to the log only.
        code = "AccessDenied" if params["error"] == "access_denied" else "Callback"
        raise AuthError(code, f"{client.id}: provider error {params['error'][:100]!r}")
    _check_state(client, state, stored)
    _check_iss(client, params.get("iss"))
    auth_code = params.get("code")
    if not auth_code:
        raise AuthError("OAuthCallback", f"{client.id}: no code in callback")

    counted = _admit_exchange(client, client_address)
    token = _callback_step(client, lambda: client.exchange(auth_code, stored.pkce))
    # The provider took the code: a real sign-in, not a guess.
    throttles.release(counted)
    return sign_in_with_token(
        client, token, nonce=stored.nonce, form=form, callback_url=stored.callback_url
    )


def sign_in_with_token(
    client: OAuthClient,
    token: Mapping[str, Any],
    *,
    nonce: str | None,
    form: Mapping[str, str],
    callback_url: str | None,
    id_token_required: bool = True,
) -> str:
    """Sign in with a token response (authorization code or device grant); return where the
    browser goes. Checks the ID token (``nonce``: the one this sign-in sent, if any) and
    userinfo, applies the linking rules and starts the session.

    Without ``id_token_required`` (the device grant, whose tokens come straight from the
    token endpoint, where no specification promises an ID token), a response without one
    takes the identity from userinfo, whose ``sub`` is then required."""
    cfg = client.config
    profile, claims = _profile(client, token, nonce, form, id_token_required=id_token_required)
    subject, info = _user_info(client, profile)
    session = current_session()
    confirm = linking.confirmation_on_return(session, client.id, subject)
    if confirm is not None:
        # Linking a new method to an old session needs a fresh sign-in; nothing is written.
        return confirm
    resolved = resolve_user(
        provider=client.id,
        provider_type=cfg.type,
        subject=subject,
        info=info,
        current_user_id=session.user.id if session else None,
        allow_email_linking=cfg.allow_email_linking,
        create_error="OAuthCreateAccount",
        tokens=account_columns(token),
    )
    return finish_signin(
        resolved.user,
        is_new_user=resolved.is_new_user,
        provider=client.id,
        amr=_amr(client, claims),
        callback_url=callback_url,
        profile=profile,
        provider_session=_provider_session(client, claims, token, subject),
    )


#: ``amr`` values (RFC 8176) by which an identity provider says it checked a second factor.
PROVIDER_MFA = frozenset({"mfa", "mca", "hwk", "otp", "sc", "pop"})


def _amr(client: OAuthClient, claims: Mapping[str, Any]) -> tuple[str, ...]:
    """How the person proved who they are: at the provider (``fed``), and with two factors
    there when the provider says so and ``trust_provider_mfa`` is on (never by default)."""
    said = claims.get("amr")
    if (
        client.config.trust_provider_mfa
        and isinstance(said, list)
        and PROVIDER_MFA.intersection(v for v in said if isinstance(v, str))
    ):
        return ("fed", MFA)
    return ("fed",)


def _provider_session(
    client: OAuthClient, claims: Mapping[str, Any], token: Mapping[str, Any], subject: str
) -> ProviderSession | None:
    """What the new session keeps for provider logout (OpenID Connect sign-ins only). A
    device sign-in without an ID token keeps userinfo's ``sub``, so that a logout token
    naming the person reaches it."""
    if not client.is_oidc:
        return None
    if not claims:
        return ProviderSession(sid=None, sub=subject, id_token=None)

    def fitting(value: Any) -> str | None:
        # A value that does not fit the column is not stored (a cut one would be another).
        return value if isinstance(value, str) and len(value) <= 255 else None

    return ProviderSession(
        sid=fitting(claims.get("sid")), sub=fitting(claims.get("sub")), id_token=token["id_token"]
    )


def _admit_exchange(client: OAuthClient, client_address: str | None) -> throttles.Counted:
    """Count a code exchange against the client address's allowance; raise AuthError
    ``RateLimited`` past it, before the provider is asked."""
    allowance = (
        throttles.client_key("oauth-ip", client_address),
        current_settings().oauth_ip_limit,
    )
    counted = throttles.admit([allowance], refused=partial(trail.throttled, provider=client.id))
    if counted is None:
        raise AuthError("RateLimited", f"{client.id}: code exchanges from this address")
    return counted


def _callback_step(client: OAuthClient, step: Callable[[], T]) -> T:
    """Run one exchange with the provider; its unavailability is ``OAuthCallback``, and an
    answer that says our configuration is wrong there is ``Configuration`` (the person can
    do nothing about it)."""
    try:
        return step()
    except ProviderUnavailable as exc:
        code = "Configuration" if exc.misconfigured else "OAuthCallback"
        raise AuthError(code, f"{client.id}: {exc}") from exc


def _required(client: OAuthClient, name: str, error_code: str) -> str:
    try:
        value = client.endpoint(name)
    except ProviderUnavailable as exc:
        raise AuthError(error_code, f"{client.id}: discovery: {exc}") from exc
    if value is None:
        raise AuthError(error_code, f"{client.id}: no {name}")
    return value


def _check_state(client: OAuthClient, state: str | None, stored: oauth_checks.Checks) -> None:
    wanted = client.config.checks
    if "state" in wanted and not (
        state and stored.state and hmac.compare_digest(state.encode(), stored.state.encode())
    ):
        raise AuthError("OAuthCallback", f"{client.id}: state missing, expired or wrong")
    if "pkce" in wanted and stored.pkce is None:
        raise AuthError("OAuthCallback", f"{client.id}: PKCE verifier cookie missing")
    if "nonce" in wanted and stored.nonce is None:
        raise AuthError("OAuthCallback", f"{client.id}: nonce cookie missing")


def _check_iss(client: OAuthClient, iss: str | None) -> None:
    """RFC 9207: an ``iss`` parameter must name our issuer; it must be there if promised."""
    if not client.is_oidc:
        return
    try:
        document = client.document()
    except ProviderUnavailable as exc:
        raise AuthError("OAuthCallback", f"{client.id}: discovery: {exc}") from exc
    advertised = document.get("authorization_response_iss_parameter_supported") is True
    if iss is None and not advertised:
        return
    # Entra's common endpoint answers with the person's tenant in place of {tenantid}. The
    # tenant is possessive (++): it runs to the next character that cannot be in one, as in
    # every issuer with a tenant ("…/{tenantid}/v2.0"), and is never given back, so a
    # made-up iss is refused in one pass; given back, an issuer with two tenants took time
    # quadratic in the iss's length.
    expected = str(document["issuer"])
    pattern = re.escape(expected).replace(re.escape("{tenantid}"), "[0-9A-Za-z-]++")
    if iss is None or not re.fullmatch(pattern, iss):
        raise AuthError("OAuthCallback", f"{client.id}: iss {iss!r} is not our issuer")


def _profile(
    client: OAuthClient,
    token: Mapping[str, Any],
    nonce: str | None,
    form: Mapping[str, str],
    *,
    id_token_required: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the profile (ID token claims merged with userinfo) and the ID token claims."""
    cfg = client.config
    claims: dict[str, Any] = {}
    raw = token.get("id_token")
    if client.is_oidc and not isinstance(raw, str) and id_token_required:
        raise AuthError(
            "Configuration",
            f"{client.id}: no id_token in token response (the client at the provider needs"
            " an ID token signing algorithm, e.g. RS256, and the openid scope)",
        )
    if client.is_oidc and isinstance(raw, str):
        try:
            claims = validate(
                raw,
                keys=client.keys,
                issuer=lambda found: _callback_step(client, lambda: client.expected_issuer(found)),
                client_id=cfg.client.client_id,
                nonce=nonce,
                leeway=client.conf.id_token_leeway.total_seconds(),
            )
        except InvalidIDToken as exc:
            code = "Configuration" if isinstance(exc, RefusedAlgorithm) else "OAuthCallback"
            raise AuthError(code, f"{client.id}: ID token: {exc}") from exc
    profile = dict(claims)

    def fetch(url: str) -> Any:
        return client.get_json(url, token["access_token"])

    def userinfo_and_quirks() -> dict[str, Any]:
        merged = profile
        userinfo_endpoint = client.endpoint("userinfo_endpoint")
        if userinfo_endpoint is not None:
            userinfo = fetch(userinfo_endpoint)
            if not isinstance(userinfo, dict):
                raise ProviderUnavailable("userinfo is not a JSON object")
            if claims and userinfo.get("sub") != claims["sub"]:
                # OIDC Core §5.3.2: otherwise the answer may be another person's.
                raise AuthError("OAuthCallback", f"{client.id}: userinfo sub mismatch")
            if client.is_oidc and not claims and not isinstance(userinfo.get("sub"), str):
                raise AuthError("OAuthCallback", f"{client.id}: no ID token and no userinfo sub")
            merged.update(userinfo)
        elif client.is_oidc and not claims:
            raise AuthError(
                "OAuthCallback", f"{client.id}: no ID token and no userinfo endpoint to ask"
            )
        if cfg.preset and cfg.preset.profile_quirk:
            merged = cfg.preset.profile_quirk(merged, fetch, userinfo_endpoint, form)
        return merged

    return _callback_step(client, userinfo_and_quirks), claims


def _user_info(client: OAuthClient, profile: Mapping[str, Any]) -> tuple[str, UserInfo]:
    """Map the profile to the subject and what the linking rules read."""
    mapped = {key: _lookup(profile, path) for key, path in client.config.profile.items()}
    subject = mapped.get("sub")
    if isinstance(subject, int) and not isinstance(subject, bool):
        subject = str(subject)  # GitHub, Discord: numeric ids
    if not isinstance(subject, str) or not subject or len(subject) > 255:
        raise AuthError("OAuthCallback", f"{client.id}: profile has no usable subject")
    return subject, UserInfo(
        email=address_or_none(mapped.get("email")),
        name=_text(mapped.get("name"), 255),
        # Whole: linking.picture_url drops a URL that is too long (a cut one is another).
        image=_text(mapped.get("image"), None),
        subject=subject,
        email_verified=mapped.get("email_verified") in (True, "true"),
    )


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
