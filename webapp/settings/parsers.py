"""The value parsers every section shares: a setting's text (or TOML value) to its type.

Each names the setting in its error, so that a bad value stops start-up with one line
saying which; ``None`` means not given.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from webapp.settings.model import ConfigError, RateLimit

_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*([smh])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def nearest(key: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name closest to a mistyped ``key``; empty
    when none is close."""
    found = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {found[0]!r}?)" if found else ""


def parse_rate(name: str, value: Any, default: RateLimit) -> RateLimit:
    """Parse ``"<count>/<window>"`` such as ``3/10m``, ``20/600s`` or ``100/1h``."""
    if value is None:
        return default
    match = _RATE_RE.match(str(value))
    if match is None or int(match[1]) < 1 or int(match[2]) < 1:
        raise ConfigError(f"{name} must look like 3/10m (count/window in s, m or h); got {value!r}")
    seconds = int(match[2]) * _UNIT_SECONDS[match[3]]
    return RateLimit(int(match[1]), timedelta(seconds=seconds))


def opt_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def parse_int(name: str, value: Any, default: int, minimum: int) -> int:
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number; got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}; got {number}")
    return number


#: Longest duration a setting may name, about 100 years: later dates would overflow.
_MAX_DURATION_SECONDS = 100 * 365 * 86400


def parse_duration(name: str, value: Any, default: timedelta) -> timedelta:
    """Parse a lifetime given in whole seconds, as Auth.js's ``maxAge`` (``7776000``: 90 days)."""
    if value is None:
        return default
    text = str(value).strip()
    whole = not isinstance(value, bool) and text.isascii() and text.isdigit()
    if not whole or not 0 < int(text) <= _MAX_DURATION_SECONDS:
        raise ConfigError(
            f"{name} must be a whole number of seconds, at least 1 (90 days: 7776000); "
            f"got {value!r}"
        )
    return timedelta(seconds=int(text))


def parse_days(name: str, value: Any, default: timedelta) -> timedelta:
    """Parse a period given in whole days (``180``), at most about 100 years."""
    days = parse_int(name, value, default.days, 1)
    if days * 86400 > _MAX_DURATION_SECONDS:
        raise ConfigError(f"{name} must be at most {_MAX_DURATION_SECONDS // 86400} days")
    return timedelta(days=days)


def parse_seconds(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= 300:
        raise ConfigError(f"{name} must be a number of seconds between 0 and 300; got {value!r}")
    return seconds


def parse_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false; got {value!r}")
