"""Flask's signed-cookie session (it carries only the CSRF secret), built for speed.

Flask's ``SecureCookieSessionInterface`` builds its itsdangerous serializer anew in both
``open_session`` and ``save_session``, on every request, cookie or not: the profile of
``GET /auth/session`` put that at several percent of the request. The keys are fixed when
the app is created, so one serializer per app does.
"""

from __future__ import annotations

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import URLSafeTimedSerializer


class CookieSessionInterface(SecureCookieSessionInterface):
    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        try:
            serializer: URLSafeTimedSerializer | None = app.extensions["webapp.session_serializer"]
        except KeyError:
            serializer = super().get_signing_serializer(app)
            app.extensions["webapp.session_serializer"] = serializer
        return serializer
