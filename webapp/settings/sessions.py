"""Sessions and the cookies that carry them: how long one lives, how many one user holds,
and HSTS, which keeps the browser (and its ``Secure`` cookies) on https.
"""

from __future__ import annotations

from typing import Any

from webapp.settings.model import Settings
from webapp.settings.parsers import parse_bool, parse_duration, parse_int
from webapp.settings.sources import Setting, Sources, declare

SETTINGS = declare(
    Setting(
        "AUTH_SESSION_MAX_AGE_ABSOLUTE",
        "session_max_age_absolute",
        "Absolute session lifetime, in whole seconds, however often the session is used: "
        "then the person signs in again.",
        field="session_max_age_absolute",
    ),
    Setting(
        "AUTH_MAX_SESSIONS_PER_USER",
        "max_sessions_per_user",
        "Live sessions one user may hold (at least 1); a sign-in beyond it ends the least "
        "recently used.",
        field="max_sessions_per_user",
    ),
    Setting(
        "AUTH_HSTS_MAX_AGE",
        "hsts_max_age",
        "`Strict-Transport-Security` max-age in seconds, sent only when `AUTH_URL` is https; "
        "`0` sends no header.",
        field="hsts_max_age",
    ),
    Setting(
        "AUTH_HSTS_INCLUDE_SUBDOMAINS",
        "hsts_include_subdomains",
        "Add `includeSubDomains` to HSTS (only if every subdomain serves https).",
        field="hsts_include_subdomains",
    ),
)


def read_sessions(sources: Sources) -> dict[str, Any]:
    get, _ = sources.readers(SETTINGS)
    return {
        "session_max_age_absolute": parse_duration(
            "AUTH_SESSION_MAX_AGE_ABSOLUTE",
            get("AUTH_SESSION_MAX_AGE_ABSOLUTE"),
            Settings.session_max_age_absolute,
        ),
        "max_sessions_per_user": parse_int(
            "AUTH_MAX_SESSIONS_PER_USER",
            get("AUTH_MAX_SESSIONS_PER_USER"),
            Settings.max_sessions_per_user,
            1,
        ),
        "hsts_max_age": parse_int(
            "AUTH_HSTS_MAX_AGE", get("AUTH_HSTS_MAX_AGE"), Settings.hsts_max_age, 0
        ),
        "hsts_include_subdomains": bool(
            parse_bool(
                "AUTH_HSTS_INCLUDE_SUBDOMAINS",
                get("AUTH_HSTS_INCLUDE_SUBDOMAINS"),
            )
        ),
    }
