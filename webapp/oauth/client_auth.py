"""Client authentication at the provider's endpoints, and the calls that need it: the
authorization code, refresh token and device code grants, the device authorization
request, revocation and introspection.

Authlib's requests client makes the calls and implements ``client_secret_basic``,
``client_secret_post`` and ``none``. The two JWT methods are plugged into it here rather
than taken from ``authlib.oauth2.rfc7523``, whose assertions live an hour and reuse one
claims dict (and so one ``jti``) when extra claims are given: ours live 60 s (docs/constants.md)
and every assertion gets a fresh random ``jti``, so a captured one cannot be replayed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from authlib.common.urls import add_params_to_qs
from authlib.integrations.base_client import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry, OctKey, RSAKey

from webapp.core import jsonsafe
from webapp.core.clock import now_timestamp
from webapp.metrics.outbound import timed_request
from webapp.oauth.metadata import (
    MISCONFIGURED,
    ProviderUnavailable,
    describe_error,
    error_answer,
    oauth_error,
    timeouts,
)
from webapp.settings import ConfigError, Settings

METHODS = (
    "client_secret_basic",
    "client_secret_post",
    "client_secret_jwt",
    "private_key_jwt",
    "none",
)
SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post", "client_secret_jwt"})
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
PrivateKey = RSAKey | ECKey


@dataclass(frozen=True)
class ClientCredentials:
    """How one client proves itself at the token endpoint."""

    client_id: str
    method: str
    #: For the secret methods; ``secret_factory`` wins when set (Apple's signed secret).
    secret: str | None = None
    secret_factory: Callable[[], str] | None = None
    #: For private_key_jwt.
    private_key: PrivateKey | None = None
    signing_alg: str | None = None

    def current_secret(self) -> str | None:
        return self.secret_factory() if self.secret_factory else self.secret


def load_private_key(path: Path, *, where: str) -> PrivateKey:
    """Load an RSA or EC private key from a PEM or JWK file; raise ConfigError naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror}") from None
    try:
        if raw.lstrip().startswith(b"{"):
            key = JWKRegistry.import_key(json.loads(raw))
        else:
            key = _import_pem(raw)
    except (JoseError, ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {path} is not an RSA or EC private key ({exc})") from None
    if not isinstance(key, RSAKey | ECKey) or not key.is_private:
        raise ConfigError(f"{where}: {path} must hold an RSA or EC private key")
    return key


def _import_pem(raw: bytes) -> PrivateKey:
    for kind in (RSAKey, ECKey):
        try:
            return kind.import_key(raw)
        except (JoseError, ValueError, TypeError):
            continue
    raise ValueError("not a PEM RSA or EC key")


def default_signing_alg(key: PrivateKey) -> str:
    """Return the JWS algorithm for ``key``: RS256, or ES256/384/512 by curve."""
    if isinstance(key, RSAKey):
        return "RS256"
    return {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}.get(key.curve_name, "ES256")


class _ClientAssertion:
    """An Authlib client auth method that adds a short-lived signed client assertion."""

    def __init__(self, name: str, key: Any, alg: str, lifetime: int) -> None:
        self.name = name
        self.key = key
        self.alg = alg
        self.lifetime = lifetime

    def __call__(
        self, auth: Any, method: str, uri: str, headers: dict[str, str], body: str
    ) -> tuple[str, dict[str, str], str]:
        now = int(now_timestamp())
        claims = {
            "iss": auth.client_id,
            "sub": auth.client_id,
            "aud": uri,  # the token endpoint (RFC 7523 §3)
            "jti": secrets.token_urlsafe(24),
            "iat": now,
            "exp": now + self.lifetime,
        }
        header: dict[str, Any] = {"alg": self.alg, "typ": "JWT"}
        if getattr(self.key, "kid", None):
            header["kid"] = self.key.kid
        assertion = jwt.encode(header, claims, self.key, algorithms=[self.alg])
        # client_id too (RFC 7521 §4.2 allows it): Glewlwyd answers a bare 400 without it,
        # and some providers set the ID token's aud from it.
        body = add_params_to_qs(
            body or "",
            [
                ("client_id", auth.client_id),
                ("client_assertion_type", ASSERTION_TYPE),
                ("client_assertion", assertion),
            ],
        )
        return uri, headers, body


class GrantRefused(Exception):
    """The token endpoint answered ``invalid_grant``: the grant is dead (expired, revoked,
    a rotated refresh token reused), not the provider."""


class TokenEndpointError(ProviderUnavailable):
    """The token endpoint answered an OAuth error other than ``invalid_grant``."""

    def __init__(self, error: str, description: str | None, status: int | None) -> None:
        super().__init__(f"token endpoint: {describe_error(status, error, description)}")
        self.error = error
        self.misconfigured = error in MISCONFIGURED


def _checked_token_answer(response: requests.Response) -> requests.Response:
    """Authlib's hook on every token endpoint answer: an error answer raises here, with its
    status and the provider's own words, rather than as whatever Authlib makes of its body
    (a 500's HTML page would be a JSON error)."""
    if response.status_code == 200:
        return response
    error, description = oauth_error(response.content)
    if error == "invalid_grant":
        raise GrantRefused(description or error)
    if error is not None:
        raise TokenEndpointError(error, description, response.status_code)
    said = error_answer(response.status_code, response.content)
    raise ProviderUnavailable(f"token endpoint: {said}")


#: The grant type of RFC 8628 §3.4.
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _session(
    client: ClientCredentials, conf: Settings, *, provider: str, endpoint: str
) -> OAuth2Session:
    """An Authlib session that authenticates as ``client`` at every endpoint it posts to,
    each of its requests counted and timed as ``provider``'s (its configured id) at
    ``endpoint`` (``outbound.ENDPOINTS``)."""
    secret = client.current_secret()
    session = OAuth2Session(
        client.client_id,
        secret,
        token_endpoint_auth_method=client.method,
        # Revocation and introspection authenticate as at the token endpoint (RFC 7009
        # §2.1, RFC 7662 §2.1).
        revocation_endpoint_auth_method=client.method,
        default_timeout=timeouts(conf),
    )
    session.register_compliance_hook("access_token_response", _checked_token_answer)
    _count_requests(session, provider, endpoint)
    lifetime = int(conf.client_assertion_lifetime.total_seconds())
    if client.method == "client_secret_jwt":
        session.register_client_auth_method(
            _ClientAssertion(client.method, OctKey.import_key(secret or ""), "HS256", lifetime)
        )
    elif client.method == "private_key_jwt":
        assert client.private_key is not None
        alg = client.signing_alg or default_signing_alg(client.private_key)
        session.register_client_auth_method(
            _ClientAssertion(client.method, client.private_key, alg, lifetime)
        )
    return session


def _count_requests(session: OAuth2Session, provider: str, endpoint: str) -> None:
    """Send each of ``session``'s HTTP requests through ``timed_request``: every call Authlib
    makes (``fetch_token``, ``revoke_token``, ``post``) ends in ``request``."""
    plain = session.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        return timed_request(provider, endpoint, lambda: plain(method, url, *args, **kwargs))

    session.request = request


def _token_grant(
    token_endpoint: str,
    client: ClientCredentials,
    conf: Settings,
    *,
    provider: str,
    endpoint: str,
    **params: Any,
) -> dict[str, Any]:
    """POST one grant to the token endpoint; return the tokens.

    Raises GrantRefused for ``invalid_grant`` and ProviderUnavailable for anything else
    that is not a token response with an access token.
    """
    try:
        with _session(client, conf, provider=provider, endpoint=endpoint) as session:
            token = session.fetch_token(token_endpoint, allow_redirects=False, **params)
    except OAuthError as exc:
        if exc.error == "invalid_grant":
            raise GrantRefused(exc.description or "invalid_grant") from exc
        raise TokenEndpointError(str(exc.error), exc.description, None) from exc
    except (requests.RequestException, ValueError, KeyError) as exc:
        raise ProviderUnavailable(f"token endpoint: {type(exc).__name__}: {exc}") from exc
    if not isinstance(token.get("access_token"), str):
        raise ProviderUnavailable("token endpoint: no access_token")
    return dict(token)


def exchange_code(
    *,
    token_endpoint: str,
    client: ClientCredentials,
    code: str,
    redirect_uri: str,
    code_verifier: str | None,
    conf: Settings,
    provider: str,
) -> dict[str, Any]:
    """Trade an authorization code for tokens; raise ProviderUnavailable on any failure.
    ``provider``: the provider's configured id (the metrics name its requests by it), as
    for the other calls below."""
    params: dict[str, Any] = {"code": code, "redirect_uri": redirect_uri}
    if code_verifier is not None:
        params["code_verifier"] = code_verifier
    try:
        return _token_grant(
            token_endpoint,
            client,
            conf,
            provider=provider,
            endpoint="token",
            grant_type="authorization_code",
            **params,
        )
    except GrantRefused as exc:  # a bad or replayed code: to the sign-in, one more failure
        raise ProviderUnavailable(f"token endpoint: invalid_grant {exc}") from exc


def refresh(
    *,
    token_endpoint: str,
    client: ClientCredentials,
    refresh_token: str,
    conf: Settings,
    provider: str,
) -> dict[str, Any]:
    """Use a refresh token (RFC 6749 §6); raise GrantRefused or ProviderUnavailable."""
    return _token_grant(
        token_endpoint,
        client,
        conf,
        provider=provider,
        endpoint="token_refresh",
        grant_type="refresh_token",
        refresh_token=refresh_token,
    )


def poll_device_code(
    *,
    token_endpoint: str,
    client: ClientCredentials,
    device_code: str,
    conf: Settings,
    provider: str,
) -> dict[str, Any]:
    """Ask once for the tokens of a device authorization (RFC 8628 §3.4). Raises
    TokenEndpointError (``authorization_pending``, ``slow_down``, ``access_denied``,
    ``expired_token``), GrantRefused or ProviderUnavailable."""
    return _token_grant(
        token_endpoint,
        client,
        conf,
        provider=provider,
        endpoint="token_device",
        grant_type=DEVICE_CODE_GRANT,
        device_code=device_code,
    )


def request_device_authorization(
    *, endpoint: str, client: ClientCredentials, scope: str, conf: Settings, provider: str
) -> dict[str, Any]:
    """POST the device authorization request (RFC 8628 §3.1) as our client; return the
    provider's JSON. Raises ProviderUnavailable for anything but a 200 JSON object."""
    data = {"scope": scope} if scope else {}
    if client.method == "client_secret_basic":
        # The other methods put client_id in the body themselves; with HTTP Basic, RFC 8628
        # §3.1 makes it optional, and django-oauth-toolkit answers 400 without it.
        data["client_id"] = client.client_id
    try:
        with _session(client, conf, provider=provider, endpoint="device_authorization") as session:
            response = session.post(
                endpoint,
                data=data,
                auth=session.client_auth(client.method),
                headers={"Accept": "application/json"},
                allow_redirects=False,
            )
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"device authorization: {type(exc).__name__}") from exc
    try:
        body = jsonsafe.loads(response.content)
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict):
        said = error_answer(response.status_code, response.content)
        raise ProviderUnavailable(f"device authorization: {said}")
    return body


def post_token(
    kind: str,
    *,
    endpoint: str,
    client: ClientCredentials,
    token: str,
    token_type_hint: str,
    conf: Settings,
    provider: str,
) -> requests.Response:
    """POST a token to the ``revoke`` (RFC 7009) or ``introspect`` (RFC 7662) endpoint as
    our client; return the answer whatever its status. Raise ProviderUnavailable when
    there is none."""
    named = "revocation" if kind == "revoke" else "introspection"
    try:
        with _session(client, conf, provider=provider, endpoint=named) as session:
            send = session.revoke_token if kind == "revoke" else session.introspect_token
            response: requests.Response = send(
                endpoint, token=token, token_type_hint=token_type_hint, allow_redirects=False
            )
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"{kind} endpoint: {type(exc).__name__}") from exc
    return response
