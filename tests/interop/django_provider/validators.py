"""The OAuth2 validator: ``sub`` is the username, and the e-mail and name claims.

DOT's ID tokens and userinfo name the person by ``str(user.pk)``, while its introspection
answer names them only by ``username``; an application that checks bearer tokens by
introspection must find the same person in both, so here ``sub`` is the username
(``get_claim_dict``; DOT's documented extension point is this validator class, set as
``OAUTH2_VALIDATOR_CLASS``). Django has no "verified e-mail address": a user in the
``email-verified`` group has one (``seed``).

The claims are callables (``get_additional_claims`` without a request argument), so DOT
lists them in its discovery document's ``claims_supported``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

#: The group whose members' e-mail addresses count as verified.
VERIFIED_GROUP = "email-verified"

Claim = Callable[[Any], Any]


def _verified(request: Any) -> bool:
    return bool(request.user.groups.filter(name=VERIFIED_GROUP).exists())


class UsernameSubjectValidator(OAuth2Validator):  # type: ignore[misc]
    def get_claim_dict(self, request: Any) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_claim_dict(request)
        claims["sub"] = lambda r: r.user.get_username()
        return claims

    def get_oidc_claims(self, token: Any, token_handler: Any, request: Any) -> dict[str, Any]:
        """DOT's claims, without those the user has no value for (Carol has no address)."""
        claims = super().get_oidc_claims(token, token_handler, request)
        return {k: v for k, v in claims.items() if v is not None}

    def get_additional_claims(self) -> dict[str, Claim]:
        return {
            "email": lambda r: r.user.email or None,
            "email_verified": _verified,
            "name": lambda r: r.user.get_full_name() or None,
            "preferred_username": lambda r: r.user.get_username(),
        }
