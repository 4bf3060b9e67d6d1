"""ID token validation (OpenID Connect Core §3.1.3.7): signature against the JWKS, claims.

joserfc verifies signatures; choosing the key and checking the claims is written out here
because the rules are the point: asymmetric algorithms only (``none`` and HMAC are refused,
so a public key can never be used as an HMAC secret), keys that cannot verify this token
are skipped rather than fatal, and a token without ``kid`` is accepted only when exactly one
key fits it.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry

from webapp.core.clock import now_timestamp

#: Algorithm -> (key type, curve) a verifying key must have.
ALGORITHMS: dict[str, tuple[str, str | None]] = {
    **{f"RS{n}": ("RSA", None) for n in (256, 384, 512)},
    **{f"PS{n}": ("RSA", None) for n in (256, 384, 512)},
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", "Ed25519"),
}

_SIGN_WITH_A_KEY_PAIR = (
    ": set the client's ID token signing algorithm at the provider to RS256 (or ES256)"
)
#: What a refused algorithm usually means, for the log.
_ALGORITHM_ADVICE = {
    **{
        f"HS{n}": " (an ID token signed with the client secret is refused by design, since"
        " anyone holding the secret could make one)" + _SIGN_WITH_A_KEY_PAIR
        for n in (256, 384, 512)
    },
    "none": " (an unsigned ID token)" + _SIGN_WITH_A_KEY_PAIR,
}


class InvalidIDToken(Exception):
    """The ID token failed a check; the message says which (for the log only)."""


class RefusedAlgorithm(InvalidIDToken):
    """The ID token is signed with an algorithm refused by design (HS*, none): the client's
    settings at the provider are at fault, not the person."""


def validate(
    token: str,
    *,
    keys: Callable[[str | None], list[dict[str, Any]]],
    issuer: str | Callable[[dict[str, Any]], str],
    client_id: str,
    nonce: str | None,
    leeway: float,
) -> dict[str, Any]:
    """Return the ID token's claims after checking signature, iss, aud, azp, exp, iat, nonce.

    ``keys(kid)`` returns the provider's JWKs (refetching for an unknown kid). ``issuer``
    is the expected ``iss``, or a function of the claims for multi-tenant providers.
    """
    claims = verified_claims(token, keys)
    _check_claims(claims, issuer=issuer, client_id=client_id, nonce=nonce, leeway=leeway)
    return claims


def verified_claims(
    token: str, keys: Callable[[str | None], list[dict[str, Any]]]
) -> dict[str, Any]:
    """Return a JWT's claims once its signature checks out against one of ``keys(kid)``;
    raise InvalidIDToken. Claims are not checked here."""
    try:
        header = jws.extract_compact(token.encode()).headers()
    except (JoseError, ValueError) as exc:
        raise InvalidIDToken(f"malformed: {exc}") from exc
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        advice = _ALGORITHM_ADVICE.get(str(alg))
        refused = RefusedAlgorithm if advice else InvalidIDToken
        raise refused(f"algorithm {alg!r} not accepted{advice or ''}")
    kid = header.get("kid")
    candidates = _candidates(keys(kid if isinstance(kid, str) else None), alg, kid)
    if not candidates:
        raise InvalidIDToken(f"no usable key for alg {alg} kid {kid!r}")
    if kid is None and len(candidates) > 1:
        raise InvalidIDToken(f"no kid and {len(candidates)} keys fit alg {alg}")
    try:
        claims: dict[str, Any] = jwt.decode(token, candidates[0], algorithms=[alg]).claims
    except (JoseError, ValueError) as exc:
        raise InvalidIDToken(f"signature: {exc}") from exc
    return claims


def audiences(claims: Mapping[str, Any]) -> list[Any]:
    """The ``aud`` claim as a list (RFC 7519 §4.1.3: one string, or an array); empty when
    it is neither. The entries are as given: callers compare them with strings."""
    aud = claims.get("aud")
    return [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []


def _candidates(jwks: list[dict[str, Any]], alg: str, kid: Any) -> list[Any]:
    kty, crv = ALGORITHMS[alg]
    usable = []
    for data in jwks:
        if kid is not None and data.get("kid") != kid:
            continue
        if data.get("kty") != kty or (crv is not None and data.get("crv") != crv):
            continue
        if data.get("use", "sig") != "sig" or data.get("alg", alg) != alg:
            continue
        ops = data.get("key_ops")
        if ops is not None and "verify" not in ops:
            continue
        try:
            usable.append(JWKRegistry.import_key(data))
        except (JoseError, ValueError, TypeError):
            continue  # malformed or unsupported key: skip it, another may do
    return usable


def _check_claims(
    claims: dict[str, Any],
    *,
    issuer: str | Callable[[dict[str, Any]], str],
    client_id: str,
    nonce: str | None,
    leeway: float,
) -> None:
    expected_iss = issuer(claims) if callable(issuer) else issuer
    if claims.get("iss") != expected_iss:
        raise InvalidIDToken(f"iss {claims.get('iss')!r} is not {expected_iss!r}")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise InvalidIDToken("sub missing")
    named = audiences(claims)
    if client_id not in named:
        raise InvalidIDToken(f"aud {claims.get('aud')!r} does not contain our client_id")
    azp = claims.get("azp")
    if azp is not None and azp != client_id:
        raise InvalidIDToken(f"azp {azp!r} is not our client_id")
    if len(named) > 1 and azp is None:
        raise InvalidIDToken("several audiences and no azp")
    now = now_timestamp()
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or exp <= now - leeway:
        raise InvalidIDToken(f"expired or no exp ({exp!r})")
    if not isinstance(iat, int | float) or iat > now + leeway:
        raise InvalidIDToken(f"iat missing or in the future ({iat!r})")
    if nonce is not None:
        got = claims.get("nonce")
        if not isinstance(got, str) or not hmac.compare_digest(got.encode(), nonce.encode()):
            raise InvalidIDToken("nonce does not match this sign-in")
