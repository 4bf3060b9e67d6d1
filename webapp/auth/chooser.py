"""What the provider chooser island needs beyond the ``providers`` and ``csrf`` JSON.

``GET providers`` keeps the Auth.js shape, so the page hands the island the rest: the
error text for ``?error=``, the safe callbackUrl, logos, credentials fields, the e-mail
prefill and whether passkeys work at this address. The island reads it from a
``<script type="application/json">`` block.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webapp.auth.errors import code_for
from webapp.auth.passkeys import unavailable_reason


def chooser_data(
    providers: Iterable[Any],
    *,
    auth_base: str,
    error_code: str | None,
    callback_url: str | None,
    email: str,
) -> dict[str, Any]:
    """Return the chooser's page data (JSON-serialisable)."""
    error = None
    if error_code:
        text = code_for(error_code)
        error = {
            "code": error_code,
            "title": text.title,
            "message": text.message,
            "action": text.action,
        }
    providers = list(providers)
    logos: dict[str, str] = {}
    credentials: dict[str, dict[str, Any]] = {}
    for p in providers:
        logo = getattr(p, "logo_url", None)
        if logo:
            logos[p.id] = logo
        if p.type == "credentials":
            credentials[p.id] = {
                "fields": [{"name": f.name, "label": f.label, "type": f.type} for f in p.fields],
                "demo": bool(getattr(p, "demo", False)),
            }
    return {
        # The page's order: ``GET providers`` is a JSON object, whose keys come back sorted.
        "order": [p.id for p in providers],
        # A path, not an absolute URL: the island fetches same-origin (connect-src 'self').
        "authBase": auth_base,
        "callbackUrl": callback_url,
        "email": email,
        "error": error,
        "logos": logos,
        "credentials": credentials,
        # Why the passkey provider cannot be offered at this address (None: it can).
        "passkeyProblem": (
            unavailable_reason() if any(p.type == "webauthn" for p in providers) else None
        ),
    }
