"""The error page's content for each code: the server renders it, the island re-renders it.

Links are paths built from the configuration (AUTH_URL's path), never from the request URL,
so neither a crafted error link nor a forged Host header can point the buttons elsewhere.
"""

from __future__ import annotations

from typing import Any

from flask import render_template

from webapp.auth.errors import ERROR_PAGE, Code, error_page_code
from webapp.observability import current_request_id
from webapp.settings import current_settings

#: The first step offered for codes whose best next step is not "sign in again".
_FIRST_STEP = {
    "Verification": "Request a new sign-in link",
    "AccessDenied": "Sign in with another account",
}


#: What the page says for an HTTP error that no sign-in code explains.
_HTTP_TEXTS = {
    400: Code(
        ERROR_PAGE,
        400,
        "That request was not understood",
        "Something in what your browser sent could not be read.",
        "Go back and try again from the page's own buttons and links.",
    ),
    404: Code(
        ERROR_PAGE,
        404,
        "Page not found",
        "There is no page at this address. It may have moved, or the link may be incomplete.",
        "Check the address, or start again from the home page.",
    ),
    405: Code(
        ERROR_PAGE,
        405,
        "That page cannot be used this way",
        "The page exists, but not for what your browser asked of it.",
        "Go back and use the page's own buttons and links.",
    ),
    413: Code(
        ERROR_PAGE,
        413,
        "Too much was sent",
        "What your browser sent is larger than this site accepts, so nothing was done.",
        "Go back and try again with less.",
    ),
}


def render_error_page(code: str | None, *, status: int | None = None) -> str:
    """Render the error page for ``code`` (or, with no code, for the HTTP ``status``),
    showing this request's id as the reference."""
    return render_template(
        "auth/error.html", code=code, status=status, request_id=current_request_id()
    )


def error_view(code: str | None, request_id: str, status: int | None = None) -> dict[str, Any]:
    """Return the error page model: texts, next steps (label + href), reference."""
    text = error_page_code(code) if code or status not in _HTTP_TEXTS else _HTTP_TEXTS[status]
    home = {"label": "Go to the home page", "href": "/"}
    signin_href = current_settings().base_path + "/signin"
    if code == "Configuration":
        # Sign-in itself is broken: the home page comes first, sign-in is only offered.
        steps = [home, {"label": "Back to sign in", "href": signin_href}]
    else:
        label = _FIRST_STEP.get(code or "", "Try signing in again")
        steps = [{"label": label, "href": signin_href}, home]
    return {
        "code": code,
        "title": text.title,
        "message": text.message,
        "action": text.action,
        "steps": steps,
        "retry": code != "Configuration",
        "requestId": request_id,
    }
