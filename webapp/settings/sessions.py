"""Sessions and the cookies that carry them: how long one lives, how many one user holds,
and HSTS, which keeps the browser (and its ``Secure`` cookies) on https.
"""

from __future__ import annotations

from typing import Any

from webapp.settings.model import Settings
from webapp.settings.parsers import parse_bool, parse_duration, parse_int
from webapp.settings.sources import Sources


def read_sessions(sources: Sources) -> dict[str, Any]:
    get = sources.get
    return {
        "session_max_age_absolute": parse_duration(
            "AUTH_SESSION_MAX_AGE_ABSOLUTE",
            get("AUTH_SESSION_MAX_AGE_ABSOLUTE", "session_max_age_absolute"),
            Settings.session_max_age_absolute,
        ),
        "max_sessions_per_user": parse_int(
            "AUTH_MAX_SESSIONS_PER_USER",
            get("AUTH_MAX_SESSIONS_PER_USER", "max_sessions_per_user"),
            Settings.max_sessions_per_user,
            1,
        ),
        "hsts_max_age": parse_int(
            "AUTH_HSTS_MAX_AGE", get("AUTH_HSTS_MAX_AGE", "hsts_max_age"), Settings.hsts_max_age, 0
        ),
        "hsts_include_subdomains": bool(
            parse_bool(
                "AUTH_HSTS_INCLUDE_SUBDOMAINS",
                get("AUTH_HSTS_INCLUDE_SUBDOMAINS", "hsts_include_subdomains"),
            )
        ),
    }
