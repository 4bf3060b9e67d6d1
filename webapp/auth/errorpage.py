"""The error page's content for each code: the server renders it, the island re-renders it.

Links are paths built from the configuration (AUTH_URL's path), never from the request URL,
so neither a crafted error link nor a forged Host header can point the buttons elsewhere.
"""

from __future__ import annotations

from typing import Any

from flask import g, render_template

from webapp.auth.errors import error_page_code
from webapp.settings import current_settings

#: The first step offered for codes whose best next step is not "sign in again".
_FIRST_STEP = {
    "Verification": "Request a new sign-in link",
    "AccessDenied": "Sign in with another account",
}


def render_error_page(code: str | None) -> str:
    """Render the error page for ``code``, showing this request's id as the reference."""
    return render_template("auth/error.html", code=code, request_id=g.get("request_id", "-"))


def error_view(code: str | None, request_id: str) -> dict[str, Any]:
    """Return the error page model: texts, next steps (label + href), reference."""
    text = error_page_code(code)
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
