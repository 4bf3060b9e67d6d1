"""One configured identity provider as the relying party talks to it: endpoints, keys, tokens.

Protocol only: where each endpoint is (configured, else discovered), the keys an ID token
is checked against, the issuer expected in it, the code exchange, refreshing, revoking and
introspecting tokens, the device authorization grant, the end-session URL, and
authenticated JSON fetches. Failures raise ``ProviderUnavailable``
(``GrantRefused`` for a dead grant, ``IntrospectionRefused`` for a token the introspection
endpoint will not look at, ``InvalidIDToken`` for keys); the flows decide which error code
that is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from authlib.common.urls import add_params_to_uri

from webapp.core import jsonsafe, urls
from webapp.oauth import client_auth
from webapp.oauth.config import OAuthConfig
from webapp.oauth.id_token import InvalidIDToken
from webapp.oauth.metadata import (
    ProviderMetadata,
    ProviderUnavailable,
    error_answer,
    get_json,
    url_allowed,
)
from webapp.settings import Settings

#: 4xx statuses that say nothing about the token: "not now" (the provider timed out or is
#: throttling us), or 401, our own client authentication refused (RFC 7662 §2.3), a
#: misconfiguration that would otherwise refuse every good token.
_NOT_ABOUT_THE_TOKEN = frozenset({401, 408, 429})
#: Endpoints an OpenID discovery document may leave out and an RFC 8414 one name.
SERVER_METADATA_ENDPOINTS = frozenset(
    {"revocation_endpoint", "introspection_endpoint", "device_authorization_endpoint"}
)


class IntrospectionRefused(Exception):
    """The introspection endpoint refused the request (a 4xx, e.g. oidc-provider's 400
    ``unsupported_token_type`` for any JWT): an answer about this token, not an outage."""


class OAuthClient:
    """The relying party's side of one provider (``config``), with its discovery cache."""

    def __init__(self, config: OAuthConfig, conf: Settings) -> None:
        self.config = config
        self.conf = conf
        self.id = config.id
        self.metadata = (
            ProviderMetadata(
                config.issuer,
                conf,
                provider=config.id,
                allow_insecure=config.allow_insecure,
                issuer_matches=_tenant_issuer_matches
                if config.preset and config.preset.tenant_issuer
                else None,
            )
            if config.type == "oidc" and config.issuer
            else None
        )

    @property
    def is_oidc(self) -> bool:
        """Whether ID tokens come from this provider (an OpenID Connect issuer)."""
        return self.metadata is not None

    def document(self) -> dict[str, Any]:
        """Return the discovery document (OpenID Connect providers only)."""
        assert self.metadata is not None
        return self.metadata.document()

    def endpoint(self, name: str) -> str | None:
        """Return a configured endpoint, else the discovered one (None if neither, or if
        the discovered value is not a string). The endpoints beyond sign-in that the
        OpenID document leaves out are looked for in the RFC 8414 document too."""
        value: str | None = getattr(self.config, name)
        if value is None and self.metadata is not None:
            found = self.document().get(name)
            if found is None and name in SERVER_METADATA_ENDPOINTS:
                found = self.metadata.server_document().get(name)
            value = found if isinstance(found, str) else None
        return value

    def _required(self, name: str) -> str:
        endpoint = self.endpoint(name)
        if endpoint is None:
            raise ProviderUnavailable(f"no {name}")
        return endpoint

    def keys(self, kid: str | None) -> list[dict[str, Any]]:
        """Return the signing keys to try for ``kid`` (refetched on an unknown kid)."""
        assert self.metadata is not None
        try:
            return self.metadata.keys(kid)
        except ProviderUnavailable as exc:
            raise InvalidIDToken(f"JWKS: {exc}") from exc

    def expected_issuer(self, claims: Mapping[str, Any]) -> str:
        """Return the ``iss`` an ID token with ``claims`` must carry."""
        issuer = str(self.document()["issuer"])
        if "{tenantid}" in issuer:
            tid = claims.get("tid")
            # Entra's common endpoint: each tenant signs with its own issuer.
            return issuer.replace("{tenantid}", tid) if isinstance(tid, str) else "<no tid>"
        return issuer

    def redirect_uri(self) -> str:
        """Return our callback URL for this provider (from AUTH_URL)."""
        return urls.auth_url(f"callback/{self.id}")

    def same_site(self) -> str:
        """Return the SameSite value the sign-in's check cookies need."""
        # A form_post answer is a cross-site POST: Lax cookies would not come with it.
        return "None" if self.config.response_mode == "form_post" else "Lax"

    def exchange(self, code: str, verifier: str | None) -> dict[str, Any]:
        """Exchange an authorization code at the token endpoint."""
        return client_auth.exchange_code(
            token_endpoint=self._required("token_endpoint"),
            client=self.config.client,
            code=code,
            redirect_uri=self.redirect_uri(),
            code_verifier=verifier,
            conf=self.conf,
            provider=self.id,
        )

    def refresh(self, refresh_token: str) -> dict[str, Any]:
        """Use a refresh token; raise GrantRefused (the grant is dead) or ProviderUnavailable."""
        return client_auth.refresh(
            token_endpoint=self._required("token_endpoint"),
            client=self.config.client,
            refresh_token=refresh_token,
            conf=self.conf,
            provider=self.id,
        )

    def poll_device_code(self, device_code: str) -> dict[str, Any]:
        """Ask once for a device authorization's tokens (see client_auth.poll_device_code)."""
        return client_auth.poll_device_code(
            token_endpoint=self._required("token_endpoint"),
            client=self.config.client,
            device_code=device_code,
            conf=self.conf,
            provider=self.id,
        )

    def request_device_authorization(self) -> dict[str, Any]:
        """Start a device authorization (RFC 8628 §3.1); return the provider's JSON."""
        endpoint = self._required("device_authorization_endpoint")
        if not url_allowed(endpoint, allow_insecure=self.config.allow_insecure):
            raise ProviderUnavailable(f"refusing insecure URL {endpoint}")
        return client_auth.request_device_authorization(
            endpoint=endpoint,
            client=self.config.client,
            scope=self.config.scope,
            conf=self.conf,
            provider=self.id,
        )

    def end_session_url(self, *, id_token_hint: str | None, state: str) -> str | None:
        """Return where to send the browser to sign out at the provider (RP-Initiated
        Logout 1.0), coming back to ``signout/callback``; None if the provider has no
        usable end_session_endpoint. Raises ProviderUnavailable if discovery fails."""
        endpoint = self.endpoint("end_session_endpoint")
        if endpoint is None or not url_allowed(endpoint, allow_insecure=self.config.allow_insecure):
            return None
        params = {
            "client_id": self.config.client.client_id,
            "post_logout_redirect_uri": urls.auth_url("signout/callback"),
            "state": state,
        }
        if id_token_hint is not None:
            params["id_token_hint"] = id_token_hint
        return str(add_params_to_uri(endpoint, list(params.items())))

    def can_revoke(self) -> bool:
        """Whether the provider has a revocation endpoint (configured or discovered)."""
        return self.endpoint("revocation_endpoint") is not None

    def revoke(self, token: str, token_type_hint: str) -> None:
        """Revoke ``token`` (RFC 7009); raise ProviderUnavailable unless the provider says
        it is done (200; an unknown or already invalid token is done too, §2.2)."""
        endpoint = self._required("revocation_endpoint")
        answer = self._post_token("revoke", endpoint, token, token_type_hint)
        if answer.status_code != 200:
            raise ProviderUnavailable(
                f"revocation endpoint: {error_answer(answer.status_code, answer.content)}"
            )

    def introspect(self, token: str) -> dict[str, Any]:
        """Return the provider's RFC 7662 answer for an access token; raise
        IntrospectionRefused for a 4xx (but 401, 408 and 429), ProviderUnavailable when
        there is no usable answer (no connection, a timeout, a 5xx, 401, 408, 429, anything
        else)."""
        endpoint = self._required("introspection_endpoint")
        answer = self._post_token("introspect", endpoint, token, "access_token")
        said = f"introspection endpoint: {error_answer(answer.status_code, answer.content)}"
        if 400 <= answer.status_code < 500 and answer.status_code not in _NOT_ABOUT_THE_TOKEN:
            raise IntrospectionRefused(said)
        if answer.status_code == 401:
            raise ProviderUnavailable(
                f"{said}: our client authentication was refused"
                " (check client_id, client_secret and token_endpoint_auth_method)"
            )
        if answer.status_code != 200:
            raise ProviderUnavailable(said)
        try:
            body = jsonsafe.loads(answer.content)
        except ValueError as exc:
            raise ProviderUnavailable("introspection endpoint: body is not JSON") from exc
        if not isinstance(body, dict) or not isinstance(body.get("active"), bool):
            raise ProviderUnavailable("introspection endpoint: no boolean active")
        return body

    def _post_token(self, kind: str, endpoint: str, token: str, hint: str) -> Any:
        if not url_allowed(endpoint, allow_insecure=self.config.allow_insecure):
            raise ProviderUnavailable(f"refusing insecure URL {endpoint}")
        return client_auth.post_token(
            kind,
            endpoint=endpoint,
            client=self.config.client,
            token=token,
            token_type_hint=hint,
            conf=self.conf,
            provider=self.id,
        )

    def get_json(self, url: str, access_token: str) -> Any:
        """GET ``url`` with the access token as a Bearer credential; return its JSON (the
        metrics name it ``userinfo`` at the userinfo endpoint, else ``profile``)."""
        return get_json(
            url,
            self.conf,
            allow_insecure=self.config.allow_insecure,
            provider=self.id,
            endpoint="userinfo" if url == self.endpoint("userinfo_endpoint") else "profile",
            headers={"Authorization": f"Bearer {access_token}"},
        )


def _tenant_issuer_matches(configured: str, found: str) -> bool:
    if configured == found:
        return True
    return "{tenantid}" in found and configured.split("/")[:3] == found.split("/")[:3]
