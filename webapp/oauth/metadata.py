"""Talking to an identity provider's metadata: discovery and JWKS, fetched lazily, cached.

Every outbound call has a connect and a read timeout (settings), so a provider that is
down or stalls costs one request its timeout and never hangs a worker. Nothing is fetched
at start-up: a provider that is down does not stop the application. A failed fetch is not
cached; the next sign-in tries again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests

from webapp.core import jsonsafe
from webapp.metrics.outbound import timed_request
from webapp.settings import Settings, is_loopback_url


class ProviderUnavailable(Exception):
    """The provider could not be reached, answered an error, or answered nonsense."""

    #: The answer says our configuration and the provider's disagree (a wrong secret, a
    #: grant the client may not use): the site's fault, not the person's.
    misconfigured = False


class NotThere(ProviderUnavailable):
    """The provider answered 404 Not Found: an answer, not an outage."""


#: OAuth error codes that mean our configuration and the provider's disagree: what to check.
MISCONFIGURED = {
    "invalid_client": "(our client authentication was refused: check client_id, the secret or"
    " key, and token_endpoint_auth_method against the client's settings at the provider)",
    "unauthorized_client": "(the client at the provider is not allowed this grant type, or"
    " (Glewlwyd) its credentials were refused: check both there)",
    "unsupported_grant_type": "(the provider does not offer this grant type)",
}


def oauth_error(content: bytes) -> tuple[str | None, str | None]:
    """The ``error`` and ``error_description`` of an OAuth error answer's JSON body
    (RFC 6749 §5.2), each None when absent, cut to a length fit for a log line."""
    try:
        body = jsonsafe.loads(content)
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    error, description = body.get("error"), body.get("error_description")
    return (
        error[:64] if isinstance(error, str) and error else None,
        description[:200] if isinstance(description, str) and description else None,
    )


def error_answer(status: int, content: bytes) -> str:
    """Say what a provider's error answer was, for the log: its HTTP status, the OAuth
    error and description when its body has them, and what a known one usually means.
    A 5xx says the fault is the provider's, since its body rarely does."""
    error, description = oauth_error(content)
    return describe_error(status, error, description)


def describe_error(status: int | None, error: str | None, description: str | None) -> str:
    """``error_answer``'s words from their parts (``status`` None: the status is unknown)."""
    words = [f"HTTP {status}"] if status is not None else []
    words += [part for part in (error, description) if part]
    if error in MISCONFIGURED:
        words.append(MISCONFIGURED[error])
    elif status is not None and status >= 500:
        words.append("(a failure at the provider: its own log says why)")
    return " ".join(words)


def url_allowed(url: str, *, allow_insecure: bool) -> bool:
    """Return whether we may talk to ``url``: https, or http on loopback / when allowed."""
    if url.startswith("https://"):
        return True
    return url.startswith("http://") and (allow_insecure or is_loopback_url(url))


def timeouts(conf: Settings) -> tuple[float, float]:
    """Return the (connect, read) timeouts ``requests`` takes."""
    return conf.http_connect_timeout, conf.http_read_timeout


def get_json(
    url: str,
    conf: Settings,
    *,
    allow_insecure: bool,
    provider: str,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """GET ``url`` and return its JSON body; raise ProviderUnavailable on any failure.
    ``provider`` (its configured id) and ``endpoint`` (``outbound.ENDPOINTS``) name the
    request in the metrics."""
    if not url_allowed(url, allow_insecure=allow_insecure):
        raise ProviderUnavailable(f"refusing insecure URL {url}")
    try:
        response = timed_request(
            provider,
            endpoint,
            lambda: requests.get(
                url,
                headers={"Accept": "application/json", **(headers or {})},
                timeout=timeouts(conf),
                allow_redirects=False,
            ),
        )
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"GET {url}: {type(exc).__name__}") from exc
    if response.status_code != 200:
        said = f"GET {url}: {error_answer(response.status_code, response.content)}"
        raise NotThere(said) if response.status_code == 404 else ProviderUnavailable(said)
    try:
        return jsonsafe.loads(response.content)
    except ValueError as exc:
        raise ProviderUnavailable(f"GET {url}: body is not JSON") from exc


class ProviderMetadata:
    """One provider's discovery document and key set, cached for the process's lifetime.

    ``issuer_matches`` decides whether the discovery document's ``issuer`` is the one the
    provider was configured with (equality, except for multi-tenant presets).
    """

    def __init__(
        self,
        issuer: str,
        conf: Settings,
        *,
        provider: str,
        allow_insecure: bool,
        issuer_matches: Callable[[str, str], bool] | None = None,
        jwks_uri: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.conf = conf
        #: The provider's configured id, which names its requests in the metrics.
        self.provider = provider
        self.allow_insecure = allow_insecure
        self._issuer_matches = issuer_matches or (lambda configured, found: configured == found)
        self._document: dict[str, Any] | None = None
        #: The RFC 8414 document (an empty dict once it is known there is none).
        self._server_document: dict[str, Any] | None = None
        self._jwks_uri = jwks_uri
        self._jwks: list[dict[str, Any]] | None = None
        self._last_refetch = float("-inf")
        # Guards the cache only: fetches run outside it, so a stalled provider costs each
        # waiting request its own timeout, not the sum of those queued before it.
        self._lock = threading.Lock()

    def _get(self, url: str, endpoint: str) -> Any:
        return get_json(
            url,
            self.conf,
            allow_insecure=self.allow_insecure,
            provider=self.provider,
            endpoint=endpoint,
        )

    def document(self) -> dict[str, Any]:
        """Return the discovery document, fetching it once; check its issuer and URLs.

        Requests that find no document each fetch it (a failure is not cached); the first
        answer stored is the one kept."""
        if self._document is not None:
            return self._document
        fetched = self._discover()
        with self._lock:
            if self._document is None:
                self._document = fetched
            return self._document

    def _discover(self) -> dict[str, Any]:
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        doc = self._get(url, "discovery")
        if not isinstance(doc, dict):
            raise ProviderUnavailable(f"{url}: not a JSON object")
        found = doc.get("issuer")
        # OpenID Connect Discovery §4.3: a mismatch means the document is not this issuer's
        # (a mix-up or a poisoned cache); we must not send the browser anywhere it names.
        if not isinstance(found, str) or not self._issuer_matches(self.issuer, found):
            raise ProviderUnavailable(f"{url}: issuer {found!r} is not {self.issuer!r}")
        for name in ("authorization_endpoint", "token_endpoint"):
            if not isinstance(doc.get(name), str):
                raise ProviderUnavailable(f"{url}: {name} missing")
        for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"):
            value = doc.get(name)
            if value is not None and not (
                isinstance(value, str) and url_allowed(value, allow_insecure=self.allow_insecure)
            ):
                raise ProviderUnavailable(f"{url}: {name} {value!r} is not an allowed URL")
        return doc

    def server_document(self) -> dict[str, Any]:
        """Return the OAuth authorization server metadata (RFC 8414), fetched once: where
        the OpenID document leaves an endpoint out (django-oauth-toolkit's names no
        revocation, introspection or device endpoint), this one may name it.

        Asked at RFC 8414's place (``/.well-known/oauth-authorization-server`` before the
        issuer's path), then after the issuer, as OpenID discovery is. A document that is
        not there, or is another issuer's, is an empty one, kept: the provider has none.
        Unreachable raises ProviderUnavailable and is asked again next time."""
        if self._server_document is not None:
            return self._server_document
        fetched: dict[str, Any] = {}
        for url in _server_metadata_urls(self.issuer):
            try:
                doc = self._get(url, "server_metadata")
            except ProviderUnavailable as exc:
                if not isinstance(exc, NotThere):
                    raise
                continue
            if isinstance(doc, dict) and isinstance(doc.get("issuer"), str):
                if self._issuer_matches(self.issuer, doc["issuer"]):
                    fetched = doc
                    break
        with self._lock:
            if self._server_document is None:
                self._server_document = fetched
            return self._server_document

    def keys(self, kid: str | None = None) -> list[dict[str, Any]]:
        """Return the provider's JWKs; refetch first if ``kid`` is not among them.

        Refetches caused by unknown kids happen at most once per ``jwks_refetch_interval``
        (the first load does not count), so rotation is picked up at once while a burst of
        tokens with made-up kids costs the provider at most one request per interval.
        """
        with self._lock:
            known = self._jwks
            fetch = known is None
            if (
                known is not None
                and kid is not None
                and not any(k.get("kid") == kid for k in known)
            ):
                now = time.monotonic()
                interval = self.conf.jwks_refetch_interval.total_seconds()
                if now - self._last_refetch >= interval:
                    self._last_refetch = now
                    fetch = True
        if known is not None and not fetch:
            return known
        fetched = self._fetch_keys()
        with self._lock:
            self._jwks = fetched
        return fetched

    def _fetch_keys(self) -> list[dict[str, Any]]:
        uri = self._jwks_uri or self.document().get("jwks_uri")
        if not isinstance(uri, str):
            raise ProviderUnavailable(f"{self.issuer}: no jwks_uri")
        body = self._get(uri, "jwks")
        keys = body.get("keys") if isinstance(body, dict) else None
        if not isinstance(keys, list):
            raise ProviderUnavailable(f"{uri}: no keys array")
        return [k for k in keys if isinstance(k, dict)]


def _server_metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's RFC 8414 document may be: §3.1's place, then after the issuer."""
    scheme, _, rest = issuer.rstrip("/").partition("://")
    host, slash, path = rest.partition("/")
    inserted = f"{scheme}://{host}/.well-known/oauth-authorization-server{slash}{path}"
    appended = issuer.rstrip("/") + "/.well-known/oauth-authorization-server"
    return [inserted] if inserted == appended else [inserted, appended]
