"""The error page's content for each code: the server renders it, the island re-renders it.

Links are paths built from the configuration (AUTH_URL's path), never from the request URL,
so neither a crafted error link nor a forged Host header can point the buttons elsewhere.
"""

from __future__ import annotations

from typing import Any

from flask import render_template

from webapp.browser_state import last_provider
from webapp.errors import ERROR_PAGE, Code, error_page_code
from webapp.i18n import N_, gettext
from webapp.providers import providers
from webapp.settings import current_settings
from webapp.telemetry.logs import current_request_id

#: The first step offered, unless the code's best next step is another (``_FIRST_STEP``).
_RETRY = N_("Try signing in again")
_FIRST_STEP = {
    "Verification": N_("Request a new sign-in link"),
    "AccessDenied": N_("Sign in with another account"),
}


#: What the page says for an HTTP error that no sign-in code explains.
_HTTP_TEXTS = {
    400: Code(
        ERROR_PAGE,
        400,
        N_("That request was not understood"),
        N_("Something in what your browser sent could not be read."),
        N_("Go back and try again from the page's own buttons and links."),
    ),
    404: Code(
        ERROR_PAGE,
        404,
        N_("Page not found"),
        N_("There is no page at this address. It may have moved, or the link may be incomplete."),
        N_("Check the address, or start again from the home page."),
    ),
    405: Code(
        ERROR_PAGE,
        405,
        N_("That page cannot be used this way"),
        N_("The page exists, but not for what your browser asked of it."),
        N_("Go back and use the page's own buttons and links."),
    ),
    413: Code(
        ERROR_PAGE,
        413,
        N_("Too much was sent"),
        N_("What your browser sent is larger than this site accepts, so nothing was done."),
        N_("Go back and try again with less."),
    ),
}


def render_error_page(code: str | None, *, status: int | None = None) -> str:
    """Render the error page for ``code`` (or, with no code, for the HTTP ``status``),
    showing this request's id as the reference."""
    return render_template(
        "auth/error.html", code=code, status=status, request_id=current_request_id()
    )


def error_view(code: str | None, request_id: str, status: int | None = None) -> dict[str, Any]:
    """Return the error page model, in the request's language: texts, next steps (label +
    href), reference, and the island's own words (``text``)."""
    http_error = not code and status in _HTTP_TEXTS
    entry = _HTTP_TEXTS[status] if http_error and status else error_page_code(code)
    home = {"label": gettext("Go to the home page"), "href": "/"}
    signin_href = current_settings().base_path + "/signin"
    if http_error:
        # No sign-in went wrong (a page not found, a request not understood): home it is.
        steps = [home]
    elif code == "Configuration":
        # Sign-in itself is broken: the home page comes first, sign-in is only offered.
        steps = [home, {"label": gettext("Back to sign in"), "href": signin_href}]
    else:
        label = gettext(_FIRST_STEP.get(code or "", _RETRY))
        steps = [{"label": label, "href": signin_href}, home]
    retry = not http_error and code != "Configuration"
    return {
        "code": code,
        **entry.texts(),
        "steps": steps,
        "retry": retry,
        # The provider of this browser's last sign-in that worked, to try again with.
        "lastUsed": _last_used() if retry else None,
        "requestId": request_id,
        # {placeholders} are filled in by the island.
        "text": {
            "reference": gettext("Reference: %(reference)s", reference="{reference}"),
            "referenceAndCode": gettext(
                "Reference: %(reference)s · code %(code)s", reference="{reference}", code="{code}"
            ),
            "copy": gettext("Copy reference"),
            "copied": gettext("Reference copied."),
            "copyFailed": gettext("Could not copy; select the reference and copy it yourself."),
            "lastUsed": gettext(
                "Last time you signed in here with %(provider)s.", provider="{name}"
            ),
        },
    }


def _last_used() -> str | None:
    """The name of the provider this browser last signed in with (not a passkey), or None."""
    provider = providers().get(last_provider.last_used() or "")
    return provider.name if provider is not None and provider.type != "webauthn" else None
