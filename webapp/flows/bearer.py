"""Requests signed in by a provider's access token (``Authorization: Bearer``), for API callers.

Only providers with ``accept_bearer_tokens = true`` take part; with none, the header is
ignored. A token is accepted when it was issued for us (its ``aud``, or for an introspected
token its ``client_id``, names one of the provider's ``bearer_token_audiences``, by default
our client id), has not expired, and its ``sub`` (or the provider's ``bearer_subject_claim``)
is an account linked here. The request is then signed in as that account's user for its
own duration: no session row, no cookie.

Two ways to check a token (``bearer_tokens``):

- ``introspection`` (default): ask the provider (RFC 7662), authenticating as our client;
  it must say ``active`` and ``token_type`` Bearer (a refresh token is active too), or, with
  ``bearer_token_type = "optional"``, at least no other type. A 4xx
  answer (oidc-provider's 400 ``unsupported_token_type`` for any JWT, such as the person's
  own ID token) refuses the token too; only no answer, a timeout, a 5xx, 408, 429 or 401
  (our client credentials refused) is an outage. Answers, positive or not, are kept in a
  bounded per-process cache under an HMAC of the token, until the token's ``exp`` or
  ``AUTH_BEARER_CACHE_TTL``, whichever is sooner, so a revoked token may still work that
  long and a refused one is not asked about again meanwhile; a token the cache does not
  know is counted per client address first (``AUTH_BEARER_IP_LIMIT``). An opaque token
  does not say who issued it, and introspecting it elsewhere would hand it to another
  provider: at most one provider may introspect (a start-up error otherwise).
- ``jwt``: a signed JWT access token (RFC 9068) checked locally: ``typ`` ``at+jwt``, the
  signature against the provider's JWKS, ``iss``, ``aud``, ``exp`` and ``nbf``. Tokens go
  to the jwt provider whose issuer their ``iss`` names.

A token that fails answers 401 with ``WWW-Authenticate: Bearer error="invalid_token"``
(``InvalidBearerToken``); a provider that cannot be asked answers 503 (``ProviderDown``).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import bindparam, select

from webapp.audit import throttles, trail
from webapp.core.cache_headers import mark_personal
from webapp.core.clock import iso_utc, utcnow
from webapp.core.keyed_hashes import keyed_hash
from webapp.errors import AccountError
from webapp.flows.provider_tokens import ProviderDown
from webapp.oauth.client import IntrospectionRefused, OAuthClient
from webapp.oauth.id_token import InvalidIDToken, audiences, verified_claims
from webapp.oauth.metadata import ProviderUnavailable
from webapp.providers import oauth_client, providers
from webapp.providers.oauth import OAuthProvider
from webapp.sessions.store import AuthUser
from webapp.settings import ConfigError, current_settings
from webapp.storage.database import HotSelect
from webapp.storage.models import Account, User
from webapp.telemetry import logsafe

log = logging.getLogger(__name__)

#: Most introspection answers one process keeps (least recently used go first).
CACHE_ENTRIES = 10_000
#: Longest token accepted in the header; longer is refused without asking anyone.
MAX_TOKEN_LENGTH = 4096
#: RFC 6750 §2.1: the scheme is case-insensitive; the token is b64token.
_HEADER = re.compile(r"bearer +([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)
_JWT_TYPES = frozenset({"at+jwt", "application/at+jwt"})
_CACHE_KEY = "webapp.bearer_cache"


class InvalidBearerToken(Exception):
    """The request's bearer token is not one we accept; the message is for the log."""


@dataclass(frozen=True)
class BearerIdentity:
    """Who a bearer token signs in, through which provider, until when."""

    user: AuthUser
    provider: str
    expires: datetime | None


@dataclass(frozen=True)
class _Verdict:
    """What checking a token found: its subject (None: refused) and expiry."""

    subject: str | None
    expires: datetime | None
    reason: str = ""


def init_app(app: Flask) -> None:
    """Check the bearer configuration and give the app its introspection cache."""
    introspecting = [
        pid
        for pid, p in app.extensions["webapp.providers"].items()
        if isinstance(p, OAuthProvider) and p.config.bearer_tokens == "introspection"
    ]
    if len(introspecting) > 1:
        raise ConfigError(
            "accept_bearer_tokens: only one provider may check bearer tokens by introspection "
            f"(an opaque token would be sent to every one of {', '.join(introspecting)}); use "
            'bearer_tokens = "jwt" for the others'
        )
    app.extensions[_CACHE_KEY] = _Cache(CACHE_ENTRIES)


def identify(header: str, *, client_address: str | None) -> BearerIdentity | None:
    """Return who the ``Authorization`` header ``header`` signs in (None: no bearer token,
    or no provider accepts them here); raise InvalidBearerToken or ProviderDown. Tokens
    the cache does not know are counted against ``client_address``'s allowance."""
    scheme = header.split(None, 1)[0].lower() if header.strip() else ""
    if scheme != "bearer":
        return None
    clients = _accepting_clients()
    if not clients:
        return None
    mark_personal()
    match = _HEADER.fullmatch(header.strip())
    if match is None or len(match.group(1)) > MAX_TOKEN_LENGTH:
        raise InvalidBearerToken("malformed Authorization header")
    token = match.group(1)
    client, verdict = _check(token, clients, client_address)
    if verdict.subject is None:
        raise InvalidBearerToken(f"{client.id if client else '-'}: {verdict.reason}")
    assert client is not None
    row = _LINKED_USER.first({"provider": client.id, "subject": verdict.subject})
    if row is None:
        raise InvalidBearerToken(f"{client.id}: no account linked for the token's subject")
    user = AuthUser(id=row.id, name=row.name, email=row.email, image=row.image)
    return BearerIdentity(user, client.id, verdict.expires)


def bearer_session_json(identity: BearerIdentity) -> dict[str, object]:
    """The ``GET session`` body for a bearer token: the session's shape, its expiry the
    token's."""
    return {
        "user": {
            "name": identity.user.name,
            "email": identity.user.email,
            "image": identity.user.image,
        },
        "expires": iso_utc(identity.expires) if identity.expires else None,
    }


_LINKED_USER = HotSelect(
    select(User.id, User.name, User.email, User.image)
    .join(Account, Account.user_id == User.id)
    .where(
        Account.provider == bindparam("provider"),
        Account.provider_account_id == bindparam("subject"),
    )
)


def _accepting_clients() -> list[OAuthClient]:
    found = (oauth_client(pid) for pid in providers())
    return [c for c in found if c is not None and c.config.bearer_tokens is not None]


def _check(
    token: str, clients: list[OAuthClient], client_address: str | None
) -> tuple[OAuthClient | None, _Verdict]:
    """Check ``token`` with the provider it belongs to."""
    issuer = _unverified_issuer(token)
    if issuer is not None:
        for client in clients:
            if client.config.bearer_tokens == "jwt" and client.config.issuer == issuer:
                return client, _checked_jwt(client, token)
    introspecting = [c for c in clients if c.config.bearer_tokens == "introspection"]
    if not introspecting:
        return None, _Verdict(None, None, "no provider takes this token")
    client = introspecting[0]
    cache: _Cache = current_app.extensions[_CACHE_KEY]
    key = client.id + ":" + _cache_key(token)
    verdict = cache.get(key)
    if verdict is None:
        _count_introspection(client_address)
        verdict = _introspected(client, token)
        ttl = current_settings().bearer_cache_ttl
        until = utcnow() + ttl
        if verdict.expires is not None:
            until = min(until, verdict.expires)
        cache.put(key, verdict, until)
    return client, verdict


def _count_introspection(client_address: str | None) -> None:
    """Count a token the cache does not know against its client address's allowance
    before the provider is asked about it: a caller making up tokens costs the provider
    at most ``AUTH_BEARER_IP_LIMIT`` requests, and then gets 429 ``RateLimited``."""
    allowance = (
        throttles.client_key("bearer-ip", client_address),
        current_settings().bearer_ip_limit,
    )
    if throttles.admit([allowance], refused=trail.throttled) is None:
        raise AccountError("RateLimited")


def _cache_key(token: str) -> str:
    """The token's keyed hash: the cache holds no token, nor a fingerprint of one that
    could be checked against a token found elsewhere."""
    return keyed_hash("bearer-cache", token)


def _unverified_issuer(token: str) -> str | None:
    """The ``iss`` a JWT claims, read without checking anything (to route it)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = _decoded(parts[1])
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    iss = payload.get("iss") if isinstance(payload, dict) else None
    return iss.rstrip("/") if isinstance(iss, str) else None


def _introspected(client: OAuthClient, token: str) -> _Verdict:
    try:
        answer = client.introspect(token)
    except IntrospectionRefused as exc:
        return _Verdict(None, None, str(exc))
    except ProviderUnavailable as exc:
        log.warning("introspection at %s failed: %s", client.id, logsafe.encode(exc))
        raise ProviderDown(client.id) from exc
    if answer["active"] is not True:
        return _Verdict(None, None, "inactive")
    token_type = answer.get("token_type")
    if token_type is None and client.config.bearer_token_type == "optional":
        pass  # the provider never says, and never introspects a refresh token as active
    elif not isinstance(token_type, str) or token_type.lower() != "bearer":
        # Not an access token (oidc-provider leaves token_type out for refresh tokens, which
        # introspect as active too), or a DPoP-bound one whose proof we do not check.
        return _Verdict(None, None, f"token_type {token_type!r} is not Bearer")
    issuer = client.config.issuer  # discovery checked it is the document's
    if issuer is not None and answer.get("iss") not in (None, issuer):
        return _Verdict(None, None, "issued by another issuer")
    audiences = set(client.config.bearer_token_audiences)
    if answer.get("client_id") not in audiences and not audiences & _audiences(answer):
        return _Verdict(None, None, "issued to another client")
    return _subject_and_expiry(client, answer, leeway=timedelta(0))


def _checked_jwt(client: OAuthClient, token: str) -> _Verdict:
    assert client.metadata is not None
    try:
        header = _decoded(token.split(".")[0])
        if str(header.get("typ", "")).lower() not in _JWT_TYPES:
            return _Verdict(None, None, f"typ {header.get('typ')!r} is not at+jwt")
        claims = verified_claims(token, client.metadata.keys)
        if claims.get("iss") != client.expected_issuer(claims):
            return _Verdict(None, None, "iss is not the provider's")
    except ProviderUnavailable as exc:
        raise ProviderDown(client.id) from exc
    except (InvalidIDToken, ValueError, AttributeError) as exc:
        return _Verdict(None, None, f"JWT: {exc}")
    if not set(client.config.bearer_token_audiences) & _audiences(claims):
        return _Verdict(None, None, f"aud {claims.get('aud')!r} is not ours")
    leeway = current_settings().id_token_leeway
    nbf = claims.get("nbf")
    if isinstance(nbf, int | float) and _moment(nbf) > utcnow() + leeway:
        return _Verdict(None, None, "not valid yet (nbf)")
    if not isinstance(claims.get("exp"), int | float):
        return _Verdict(None, None, "no exp")
    return _subject_and_expiry(client, claims, leeway=leeway)


def _subject_and_expiry(
    client: OAuthClient, claims: Mapping[str, Any], *, leeway: timedelta
) -> _Verdict:
    exp = claims.get("exp")
    expires = _moment(exp) if isinstance(exp, int | float) else None
    if expires is not None and expires + leeway <= utcnow():
        return _Verdict(None, None, "expired")
    name = client.config.bearer_subject_claim
    sub = claims.get(name)
    if not isinstance(sub, str) or not sub or len(sub) > 255:
        return _Verdict(None, None, f"no usable {name}")
    return _Verdict(sub, expires)


def _audiences(claims: Mapping[str, Any]) -> set[str]:
    return {a for a in audiences(claims) if isinstance(a, str)}


def _moment(seconds: float) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return datetime.max.replace(tzinfo=UTC)


def _decoded(part: str) -> Any:
    """The JSON in one base64url part of a JWT (raises ValueError)."""
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


class _Cache:
    """A bounded, thread-safe map of verdicts that each expire at their own moment."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[_Verdict, datetime]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> _Verdict | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[1] <= utcnow():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: str, verdict: _Verdict, until: datetime) -> None:
        with self._lock:
            self._entries[key] = (verdict, until)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
