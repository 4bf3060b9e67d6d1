"""The state, PKCE and nonce of an OAuth sign-in, each in its own encrypted cookie.

Each value is sealed (``sealed_cookies``) and bound to the provider id and the check's
name: a cookie cannot be read, forged, or moved to another provider or check, and it
expires after 900 s even if a browser keeps it.

Parallel tabs: the cookie names carry a digest of the flow's ``state``, so each sign-in
in flight has its own cookies and a second tab cannot overwrite the first tab's. A
provider without the state check has one flow at a time (its cookies have fixed names).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from flask import request

from webapp.browser_state import cookies, sealed_cookies
from webapp.settings import current_settings

#: What a flow keeps, one cookie each: the three checks and where to go afterwards.
ITEMS = ("state", "pkce", "nonce", "callback_url")
_KEY_PURPOSE = "oauth-checks"


@dataclass(frozen=True)
class Checks:
    """The values one sign-in must see again at its callback (None: check not used)."""

    state: str | None = None
    pkce: str | None = None
    nonce: str | None = None
    #: Not a check: the callbackUrl given at sign-in, kept for after the provider's answer.
    callback_url: str | None = None


def _flow_key(state: str | None) -> str:
    if state is None:
        return "0"
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def _name(provider_id: str, item: str, state: str | None) -> str:
    short = {"callback_url": "callback-url"}.get(item, item)
    return cookies.cookie_name(f"auth.{short}.{provider_id}.{_flow_key(state)}")


def _bound_to(provider_id: str, check: str) -> str:
    return f"{provider_id}\x00{check}"


def store(provider_id: str, checks: Checks, *, same_site: str = "Lax") -> None:
    """Queue one cookie per check in use; ``same_site="None"`` for form_post returns."""
    max_age = int(current_settings().oauth_check_max_age.total_seconds())
    for check in ITEMS:
        value = getattr(checks, check)
        if value is not None:
            cookies.set_cookie(
                _name(provider_id, check, checks.state),
                sealed_cookies.seal(
                    value,
                    purpose=_KEY_PURPOSE,
                    bound_to=_bound_to(provider_id, check),
                    max_age=max_age,
                ),
                max_age=max_age,
                same_site=same_site,
            )


def take(provider_id: str, state: str | None, *, same_site: str = "Lax") -> Checks:
    """Read and clear this flow's cookies; a missing, forged or expired one reads as None.

    Clearing happens whatever the outcome, so a callback URL cannot be replayed in this
    browser once it has been used.
    """
    found: dict[str, str | None] = {}
    for check in ITEMS:
        name = _name(provider_id, check, state)
        token = request.cookies.get(name)
        found[check] = (
            sealed_cookies.open_sealed(
                token, purpose=_KEY_PURPOSE, bound_to=_bound_to(provider_id, check)
            )
            if token
            else None
        )
        if token is not None:
            cookies.clear_cookie(name, same_site=same_site)
    return Checks(**found)
