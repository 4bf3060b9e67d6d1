"""What the provider chooser island needs beyond the ``providers`` and ``csrf`` JSON.

``GET providers`` keeps the Auth.js shape, so the page hands the island the rest: the
providers' names as people read them (a built-in provider's translated), the error text
for ``?error=``, the safe callbackUrl, logos, credentials fields, the e-mail prefill,
whether passkeys work at this address, and every word the island says, in the
request's language (``text``; ``{name}`` placeholders are filled in by the island). The
island reads it from a ``<script type="application/json">`` block.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webapp.browser_state import last_provider
from webapp.errors import code_for
from webapp.i18n import gettext, ngettext
from webapp.passkeys.relying_party import passkey_texts, unavailable_reason

#: Provider types that sign in with one button (as ``REDIRECT_TYPES`` in ui-src/chooser).
REDIRECT_TYPES = frozenset({"oidc", "oauth", "saml"})


def chooser_data(
    providers: Iterable[Any],
    *,
    auth_base: str,
    error_code: str | None,
    callback_url: str | None,
    email: str,
) -> dict[str, Any]:
    """Return the chooser's page data (JSON-serialisable)."""
    error = {"code": error_code, **code_for(error_code).texts()} if error_code else None
    providers = list(providers)
    last = last_provider.last_used()
    logos: dict[str, str] = {}
    credentials: dict[str, dict[str, Any]] = {}
    for p in providers:
        logo = getattr(p, "logo_url", None)
        if logo:
            logos[p.id] = logo
        if p.type == "credentials":
            credentials[p.id] = {
                "fields": [
                    {"name": f.name, "label": f.shown_label, "type": f.type} for f in p.fields
                ],
                "demo": bool(getattr(p, "demo", False)),
            }
    return {
        # The page's order: ``GET providers`` is a JSON object, whose keys come back sorted.
        "order": [p.id for p in providers],
        # The names to show, in the request's language (``GET providers`` has them in English).
        "names": {p.id: p.name for p in providers},
        # A path, not an absolute URL: the island fetches same-origin (connect-src 'self').
        "authBase": auth_base,
        "callbackUrl": callback_url,
        "email": email,
        "error": error,
        # The provider of this browser's last sign-in that worked (None: none, or a passkey).
        "lastUsed": next(
            (
                {"id": p.id, "name": p.name}
                for p in providers
                if p.id == last and p.type != "webauthn"
            ),
            None,
        ),
        "logos": logos,
        "credentials": credentials,
        # Why the passkey provider cannot be offered at this address (None: it can).
        "passkeyProblem": (
            unavailable_reason() if any(p.type == "webauthn" for p in providers) else None
        ),
        "text": _texts(sum(p.type in REDIRECT_TYPES for p in providers)),
    }


def _texts(buttons: int) -> dict[str, Any]:
    """The chooser's words; ``buttons``: how many providers sign in with one button."""
    return {
        "filterLabel": gettext("Find your sign-in provider"),
        # The number of buttons is known here, so its plural is the catalogue's.
        "providerCount": ngettext("%(num)d provider", "%(num)d providers", buttons),
        # TRANSLATORS: under the filter box: how many provider buttons it leaves.
        "matchCount": gettext("Showing %(shown)s of %(total)s", shown="{shown}", total="{total}"),
        "noMatch": gettext("No provider matches “%(query)s”.", query="{query}"),
        "or": gettext("or"),
        "signInWith": gettext("Sign in with %(provider)s", provider="{name}"),
        "continueWith": gettext("Continue with %(provider)s", provider="{name}"),
        "redirecting": gettext("Redirecting to %(provider)s…", provider="{name}"),
        "lastUsed": gettext("last used"),
        "emailLabel": gettext("E-mail address"),
        "sendingLink": gettext("Sending your link…"),
        "signingIn": gettext("Signing in…"),
        "offline": gettext("We could not reach the server. Check your connection and try again."),
        "demoTitle": gettext("Development only:"),
        "demoNote": gettext(
            "any e-mail address with the password %(password)s signs in. This option cannot "
            "be enabled in production.",
            password="{password}",
        ),
        # What model.js's emailProblem finds, by its key.
        "emailProblems": {
            "empty": gettext("Enter your e-mail address."),
            "tooLong": gettext("That address is too long."),
            "spaces": gettext("An e-mail address cannot contain spaces or quotes."),
            "oneAt": gettext("Enter an address with one @, like ann@example.com."),
            "local": gettext("Add the part before the @, like ann@example.com."),
            "domain": gettext("Check the part after the @, like example.com."),
        },
        "passkeyButton": gettext("Sign in with a passkey"),
        "passkeyWaiting": gettext("Waiting for your passkey…"),
        "passkey": passkey_texts(),
    }
