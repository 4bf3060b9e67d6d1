"""``/language/<code>``: the footer's links, which keep a language for this browser."""

from __future__ import annotations

from flask import Blueprint, abort, redirect, request
from werkzeug.wrappers import Response

from webapp.browser_state import cookies
from webapp.core.redirects import safe_callback_url
from webapp.i18n import COOKIE_MAX_AGE, known_codes, locale_cookie_name

#: Named "i18n" as the footer's ``url_for("i18n.choose", …)`` links it.
bp = Blueprint("i18n", __name__)


@bp.get("/language/<code>")
def choose(code: str) -> Response:
    """Keep ``code`` as this browser's language, then go back to the page the link was on.

    That page is the ``Referer`` (the pages' policy sends it within the site), followed
    only if it is on this site; without one, the home page. The pages print nothing of
    the request for the way back.
    """
    if code not in known_codes():
        abort(404)
    cookies.set_cookie(locale_cookie_name(), code, max_age=COOKIE_MAX_AGE)
    response = redirect(safe_callback_url(request.referrer), code=303)
    response.headers["Cache-Control"] = "no-store"
    return response
