"""Logout token validation (OpenID Connect Back-Channel Logout 1.0 §2.6).

The signature is checked as an ID token's is (``id_token.verified_claims``: the provider's
keys, asymmetric algorithms only, refetching once for an unknown ``kid``). The claims are
checked as the specification lists them: ``iss``, ``aud``, ``iat`` (no older than
``LOGOUT_TOKEN_MAX_AGE``; in the future only within the leeway), ``exp`` when present,
``jti``, the back-channel logout event, ``sub`` and/or ``sid``, and no ``nonce`` (so an ID
token can never pass for a logout token). Whether the ``jti`` was seen before is the
flow's business: it needs the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError

from webapp.core.clock import now_timestamp
from webapp.oauth.id_token import InvalidIDToken, audiences, verified_claims

BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
#: Longest a logout token is accepted after its ``iat`` (docs/constants.md). A provider
#: sends it at once; a used ``jti`` is remembered this long (plus the leeway).
LOGOUT_TOKEN_MAX_AGE = 300
#: Largest logout token read at all.
MAX_LENGTH = 16384
#: ``typ`` header values accepted: the explicit type, the generic one, or none at all.
_TYPES = frozenset({"logout+jwt", "application/logout+jwt", "jwt"})


class InvalidLogoutToken(Exception):
    """The logout token failed a check; the message says which (for the log only)."""


@dataclass(frozen=True)
class LogoutToken:
    """A logout token that passed every check."""

    jti: str
    sid: str | None
    sub: str | None
    #: Epoch seconds after which this token would be refused anyway (its ``jti`` may be
    #: forgotten then).
    refused_after: float


def validate_logout_token(
    token: str,
    *,
    keys: Callable[[str | None], list[dict[str, Any]]],
    issuer: Callable[[dict[str, Any]], str],
    client_id: str,
    leeway: float,
) -> LogoutToken:
    """Return the checked logout token; raise InvalidLogoutToken."""
    if len(token) > MAX_LENGTH:
        raise InvalidLogoutToken(f"longer than {MAX_LENGTH} characters")
    try:
        typ = jws.extract_compact(token.encode()).headers().get("typ")
    except (JoseError, ValueError) as exc:
        raise InvalidLogoutToken(f"malformed: {exc}") from exc
    if typ is not None and (not isinstance(typ, str) or typ.lower() not in _TYPES):
        raise InvalidLogoutToken(f"typ {typ!r} is not a logout token's")
    try:
        claims = verified_claims(token, keys)
    except InvalidIDToken as exc:
        raise InvalidLogoutToken(str(exc)) from exc
    expected = issuer(claims)
    if claims.get("iss") != expected:
        raise InvalidLogoutToken(f"iss {claims.get('iss')!r} is not {expected!r}")
    if client_id not in audiences(claims):
        raise InvalidLogoutToken(f"aud {claims.get('aud')!r} does not contain our client_id")
    refused_after = _check_times(claims, leeway)
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > 255:
        raise InvalidLogoutToken("jti missing or unusable")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_LOGOUT_EVENT), dict):
        raise InvalidLogoutToken("no back-channel logout event")
    if "nonce" in claims:
        raise InvalidLogoutToken("a nonce is present (an ID token?)")
    sid, sub = _text(claims, "sid"), _text(claims, "sub")
    if sid is None and sub is None:
        raise InvalidLogoutToken("neither sid nor sub")
    return LogoutToken(jti=jti, sid=sid, sub=sub, refused_after=refused_after)


def _check_times(claims: dict[str, Any], leeway: float) -> float:
    now = now_timestamp()
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int | float) or isinstance(iat, bool):
        raise InvalidLogoutToken("iat missing")
    if iat > now + leeway:
        raise InvalidLogoutToken(f"iat {iat!r} is in the future")
    refused_after = iat + LOGOUT_TOKEN_MAX_AGE + leeway
    if exp is not None:
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise InvalidLogoutToken(f"exp {exp!r} is not a number")
        refused_after = min(refused_after, exp + leeway)
    if refused_after <= now:
        raise InvalidLogoutToken("expired")
    return float(refused_after)


def _text(claims: dict[str, Any], name: str) -> str | None:
    """A claim that is a usable string, else None; present but unusable is refused."""
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise InvalidLogoutToken(f"{name} is not a usable string")
    return value
