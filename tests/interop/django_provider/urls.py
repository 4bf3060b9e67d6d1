"""DOT under ``/o/``, as its tutorial mounts it: the OpenID issuer is ``<origin>/o``, and
DOT serves its RFC 8414 document at ``<issuer>/.well-known/oauth-authorization-server``
only (its ``metadata_urlpatterns`` are not mounted again at the root, so the RFC 8414
location ``<origin>/.well-known/oauth-authorization-server/o`` answers 404).
Django's login page is at ``/accounts/login/`` (``LOGIN_URL``).
"""

from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
