"""Who this request's ``Authorization: Bearer`` token signs in (``webapp.flows.bearer``
checks it), asked at most once per request."""

from __future__ import annotations

from flask import g, request

from webapp.flows.bearer import BearerIdentity, identify


def bearer_identity() -> BearerIdentity | None:
    """Return who this request's bearer token signs in (None: no token, or none accepted
    here); raise InvalidBearerToken or ProviderDown. Checked at most once per request."""
    if "auth_bearer" in g:
        cached: BearerIdentity | None = g.auth_bearer
        return cached
    g.auth_bearer = None
    identity = identify(
        request.headers.get("Authorization", ""), client_address=request.remote_addr
    )
    g.auth_bearer = identity
    return identity
