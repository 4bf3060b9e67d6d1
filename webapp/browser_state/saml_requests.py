"""The SAML AuthnRequests this browser started and not yet finished: each request's ID (the
response's InResponseTo must name one) and the callbackUrl to go to afterwards, in a
sealed cookie of its own (``sealed_cookies``, bound to the provider), for 900 s.

The IdP returns the browser with a cross-site POST (the HTTP-POST binding), on which a
browser sends no SameSite=Lax cookie. These cookies are therefore SameSite=None, which
browsers accept only with Secure (HTTPS, or http://localhost); to keep them from every
other request, their path is the provider's assertion consumer alone
(``{AUTH_URL}/callback/<id>``). They carry nothing but a random request ID and a URL,
sealed: another site that makes the browser post there gains nothing without a response
the IdP signed for that very request.

Parallel tabs: each request's cookie is named by a digest of its ID, so a second sign-in
does not overwrite the first; the assertion consumer reads them all, and removes the one
its response answered. A refused response removes none: each stays good for its own
response only, which is accepted once.

Single logout (``logout=True``): the LogoutRequest our sign-out sent the browser to the IdP
with waits the same way, with where the sign-out goes next, in cookies whose path is our
single logout URL (``{AUTH_URL}/saml/<id>/slo``). The IdP sends the browser back with a
top-level GET, on which SameSite=Lax cookies are sent: these are Lax.
"""

from __future__ import annotations

import hashlib
import json

from flask import request

from webapp.browser_state import cookies, sealed_cookies
from webapp.settings import current_settings

_KEY_PURPOSE = "saml-requests"
#: SameSite=None: the IdP's POST is cross-site (see above).
_SAME_SITE = "None"


def _prefix(provider_id: str, logout: bool) -> str:
    kind = "saml-logout" if logout else "saml-request"
    return cookies.cookie_name(f"auth.{kind}.{provider_id}.")


def _digest(request_id: str) -> str:
    return hashlib.sha256(request_id.encode()).hexdigest()[:16]


def _path(provider_id: str, logout: bool) -> str:
    base = current_settings().base_path
    return f"{base}/saml/{provider_id}/slo" if logout else f"{base}/callback/{provider_id}"


def _same_site(logout: bool) -> str:
    return "Lax" if logout else _SAME_SITE


def _purpose(logout: bool) -> str:
    return f"{_KEY_PURPOSE}-logout" if logout else _KEY_PURPOSE


def store(
    provider_id: str, request_id: str, callback_url: str | None, *, logout: bool = False
) -> None:
    """Queue the cookie of one AuthnRequest (or LogoutRequest) this browser is sent with."""
    max_age = int(current_settings().oauth_check_max_age.total_seconds())
    value = json.dumps({"id": request_id, "callback_url": callback_url})
    cookies.set_cookie(
        _prefix(provider_id, logout) + _digest(request_id),
        sealed_cookies.seal(value, purpose=_purpose(logout), bound_to=provider_id, max_age=max_age),
        max_age=max_age,
        path=_path(provider_id, logout),
        same_site=_same_site(logout),
    )


def pending(provider_id: str, *, logout: bool = False) -> dict[str, str | None]:
    """Every request of ``provider_id`` this browser started and has not finished: request
    ID -> callbackUrl. A forged, moved or expired cookie is left out."""
    prefix = _prefix(provider_id, logout)
    found: dict[str, str | None] = {}
    for name, token in request.cookies.items():
        if name.startswith(prefix):
            opened = sealed_cookies.open_sealed(
                token, purpose=_purpose(logout), bound_to=provider_id
            )
            if opened is not None:
                value = json.loads(opened)
                found[str(value["id"])] = value["callback_url"]
    return found


def spend(provider_id: str, request_id: str, *, logout: bool = False) -> None:
    """Queue the removal of ``request_id``'s cookie: its response has been used."""
    cookies.clear_cookie(
        _prefix(provider_id, logout) + _digest(request_id),
        path=_path(provider_id, logout),
        same_site=_same_site(logout),
    )
