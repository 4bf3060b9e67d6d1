"""Django settings for the test provider: DOT with OpenID Connect, read from config.json.

Only what DOT needs is installed (auth, contenttypes, sessions, oauth2_provider). DEBUG is
off, so a missing page is Django's plain 404, as in production.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ["DOT_PROVIDER_DIR"])
CONFIG = json.loads((DATA_DIR / "config.json").read_text())
ISSUER: str = CONFIG["issuer"]  # http://127.0.0.1:<port>/o
ORIGIN = ISSUER.rsplit("/", 1)[0]

SECRET_KEY = "dot-interop-tests-only-" + "k" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.interop.django_provider.urls"
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "tests.interop.django_provider.request_log.RequestLogMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "dot.sqlite3",
        # The server's threads and the tests' reads share the file.
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
LOGIN_URL = "/accounts/login/"
# A fast hasher: the users' passwords and DOT's hashed client secrets are checked on
# every sign-in and token request; PBKDF2's default cost would dominate the test run.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.request": {"handlers": ["stderr"], "level": "ERROR"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "WARNING"},
    },
}


def _pem(path: str) -> str:
    return Path(path).read_text()


OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    # Fixed, so the discovery documents, ID tokens and RFC 8414 metadata all name it.
    "OIDC_ISS_ENDPOINT": ISSUER,
    # The signing key (RS256) and the ones retired by a rotation, still published in the
    # JWKS so ID tokens signed before the rotation still verify.
    "OIDC_RSA_PRIVATE_KEY": _pem(CONFIG["signing_key"]),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [_pem(p) for p in CONFIG["inactive_keys"]],
    "OAUTH2_VALIDATOR_CLASS": "tests.interop.django_provider.validators.UsernameSubjectValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Your e-mail address",
        "profile": "Your name",
        # DOT's introspection endpoint also accepts a bearer token with this scope.
        "introspection": "Introspect tokens",
    },
    "DEFAULT_SCOPES": ["openid"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "PKCE_REQUIRED": True,
    # RP-initiated logout; the confirmation page is always shown (DOT's default).
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": True,
    # RFC 9207: the authorization response carries iss, and discovery says so.
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # The device authorization grant (RFC 8628).
    "OAUTH_DEVICE_VERIFICATION_URI": ORIGIN + "/o/device/",
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": ORIGIN + "/o/device/?user_code={user_code}",
    "DEVICE_FLOW_INTERVAL": CONFIG["device_interval"],
}
