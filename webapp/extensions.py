"""Extension objects, created unbound; ``create_app`` binds them with ``init_app``."""

from __future__ import annotations

from flask import g, request
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import csrf as wtf_csrf
from sqlalchemy import MetaData

from webapp.hosts import is_own_origin
from webapp.settings import current_settings

# Deterministic constraint names, so migrations can drop and alter them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class CSRFProtect(wtf_csrf.CSRFProtect):
    """Flask-WTF's token check, then: a browser that names the page's origin names ours.

    Flask-WTF's own Referer check (``WTF_CSRF_SSL_STRICT``, off in ``create_app``) compares
    with the request's ``Host``; this one compares with AUTH_URL. ``Origin: null`` (sent
    under ``Referrer-Policy: no-referrer``) and a missing header leave the token to decide.
    """

    def protect(self, apply_exemptions: bool = False) -> None:
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


db = SQLAlchemy(metadata=MetaData(naming_convention=NAMING_CONVENTION))
login_manager = LoginManager()
csrf = CSRFProtect()
