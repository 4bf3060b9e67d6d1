"""The request-side extension objects (the CSRF check, Flask-Login), created unbound;
``create_app`` binds them with ``init_app``."""

from __future__ import annotations

import secrets
from typing import Any

import flask_login
from flask import Flask, current_app, g, request, session
from flask_wtf import csrf as wtf_csrf

from webapp.browser_state.flask_session import KeyedOnceSerializer, LazySession
from webapp.core.hosts import is_own_origin
from webapp.sessions import reauthentication
from webapp.sessions.store import current_session
from webapp.settings import current_settings
from webapp.web.error_answers import recent_signin_needed


class CSRFProtect(wtf_csrf.CSRFProtect):
    """Flask-WTF's token check, then: a browser that names the page's origin names ours.

    Flask-WTF's own Referer check (``WTF_CSRF_SSL_STRICT``, off in ``create_app``) compares
    with the request's ``Host``; this one compares with AUTH_URL. ``Origin: null`` (sent
    under ``Referrer-Policy: no-referrer``) and a missing header leave the token to decide.
    """

    def protect(self, apply_exemptions: bool = False) -> None:
        # The method first: Flask-WTF looks up the view's exemption before it, on every
        # GET too.
        if request.method not in current_app.config["WTF_CSRF_METHODS"]:
            return
        super().protect(apply_exemptions)
        if not g.get("csrf_valid"):
            return
        conf = current_settings()
        origin = request.headers.get("Origin")
        if origin and origin != "null":
            if not is_own_origin(origin, conf):
                self._error_response("The request's Origin is not this site.")
        elif request.referrer and not is_own_origin(request.referrer, conf):
            self._error_response("The request's Referer is not this site.")

    def token(self) -> str:
        """This request's CSRF token, as Flask-WTF's ``generate_csrf`` makes it (a secret
        kept in Flask's session, signed with a time stamp) and checks it, but signed by a
        serializer made once per app: ``generate_csrf`` builds one, and derives its key,
        for every token, which made ``GET /auth/csrf`` cost more than a session read."""
        field: str = current_app.config["WTF_CSRF_FIELD_NAME"]
        token: str | None = g.get(field)
        if token is None:
            if field not in session:
                session[field] = secrets.token_hex(20)
            token = _csrf_serializer(current_app).dumps(session[field])
            setattr(g, field, token)
        return token


def _csrf_serializer(app: Flask) -> KeyedOnceSerializer:
    serializer: KeyedOnceSerializer | None = app.extensions.get("webapp.csrf_serializer")
    if serializer is None:
        secret: str = app.config.get("WTF_CSRF_SECRET_KEY") or app.config["SECRET_KEY"]
        serializer = KeyedOnceSerializer(secret, salt="wtf-csrf-token")
        app.extensions["webapp.csrf_serializer"] = serializer
    return serializer


class LoginManager(flask_login.LoginManager):
    """Flask-Login, without its remember-me cookie: sessions live in the database, and
    refreshing that cookie after every request read Flask's session on every request.

    A login is fresh (``fresh_login_required``) when its sign-in, or a later confirmation,
    is recent by the account area's rule (AUTH_REAUTH_MAX_AGE); one that is not is sent to
    the confirmation page (``needs_refresh``), as ``recent_signin_required`` does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.needs_refresh_callback = recent_signin_needed

    def init_app(self, app: Flask, add_context_processor: bool = True) -> None:
        app.login_manager = self  # type: ignore[attr-defined]
        if add_context_processor:
            app.context_processor(flask_login.utils._user_context_processor)
        flask_login.user_loaded_from_request.connect(_mark_freshness, app)


def _mark_freshness(_app: Flask, **_user: Any) -> None:
    """Make Flask-Login's ``login_fresh()`` true for this request when its browser session
    is recent; the cookie never keeps it (a bearer token's caller is never fresh)."""
    auth_session = current_session()
    if auth_session is not None and reauthentication.is_recent(auth_session):
        assert isinstance(session, LazySession)  # create_app's session interface
        session.for_this_request("_fresh", True)


login_manager = LoginManager()
csrf = CSRFProtect()
