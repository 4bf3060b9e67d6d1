"""The identity provider's metadata (its entity ID, its SSO and SLO endpoints, its signing
keys): read from ``idp_metadata_file`` at start-up, or fetched from ``idp_metadata_url``
when the service provider first needs it. Nothing is fetched at start-up, so an IdP that is
down does not stop the application.

``service_provider`` keeps what it builds from a usable document until ``refresh_at``: the
document's own cacheDuration, bounded (``MIN_CACHE``..``MAX_CACHE``, ``DEFAULT_CACHE``
without one), and never past its validUntil. The first use after that fetches it again (an
IdP that rolled its signing key over is followed); a fetch or document that fails keeps the
last good copy in force, logs one warning, and is tried again ``MIN_CACHE`` later, until
that copy's validUntil, after which the IdP is unavailable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import requests

from webapp.metrics.outbound import timed_request
from webapp.saml.config import SamlConfig
from webapp.settings import ConfigError

#: The largest metadata document read: one IdP's is a few kilobytes.
MAX_BYTES = 1 << 20
#: How long a metadata document is kept before it is fetched again (see above).
MIN_CACHE = timedelta(minutes=5)
MAX_CACHE = timedelta(hours=24)
DEFAULT_CACHE = timedelta(hours=1)
#: An xs:duration, as cacheDuration gives it (e.g. PT6H, P1D); no sign, no fractions of
#: anything but seconds.
_DURATION = re.compile(
    r"P(?:(\d{1,9})Y)?(?:(\d{1,9})M)?(?:(\d{1,9})D)?"
    r"(?:T(?:(\d{1,9})H)?(?:(\d{1,9})M)?(?:(\d{1,9})(?:\.\d{1,9})?S)?)?"
)
_SECONDS_PER_PART = (365 * 86400, 30 * 86400, 86400, 3600, 60, 1)


class MetadataUnavailable(Exception):
    """The IdP's metadata could not be fetched, or is not a usable document."""


def source(config: SamlConfig, timeouts: tuple[float, float]) -> Callable[[], str]:
    """What returns ``config``'s IdP metadata: the file's text, read now (raise
    ConfigError), or the URL's document, fetched each time it is asked for."""
    if config.idp_metadata_file is not None:
        text = _read_file(config.id, config.idp_metadata_file)
        return lambda: text
    assert config.idp_metadata_url is not None
    return partial(_fetch, config.id, config.idp_metadata_url, timeouts)


def _read_file(provider_id: str, path: Path) -> str:
    """``idp_metadata_file``'s text; raise ConfigError."""
    where = f"provider {provider_id!r}: idp_metadata_file"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it: {exc}") from None
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{where}: over {MAX_BYTES} bytes")
    return text


def _fetch(provider_id: str, url: str, timeouts: tuple[float, float]) -> str:
    """``url``'s document (counted as ``provider_id``'s ``saml_metadata`` request); raise
    MetadataUnavailable."""
    get = partial(requests.get, url, timeout=timeouts, allow_redirects=False, stream=True)
    try:
        with timed_request(provider_id, "saml_metadata", get) as answer:
            if answer.status_code != 200:
                raise MetadataUnavailable(f"GET {url}: HTTP {answer.status_code}")
            body = b""
            for chunk in answer.iter_content(64 * 1024):
                body += chunk
                if len(body) > MAX_BYTES:
                    raise MetadataUnavailable(f"GET {url}: over {MAX_BYTES} bytes")
    except requests.RequestException as exc:
        raise MetadataUnavailable(f"GET {url}: {type(exc).__name__}") from exc
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise MetadataUnavailable(f"GET {url}: not UTF-8") from None


def refresh_at(
    fetched_at: datetime, cache_duration: str | None, valid_until: datetime | None
) -> datetime:
    """When a document fetched at ``fetched_at`` is fetched again: after its cacheDuration
    (an xs:duration; unreadable or absent: ``DEFAULT_CACHE``) within the bounds, and no
    later than its validUntil."""
    found = _DURATION.fullmatch(cache_duration.strip()) if cache_duration else None
    if found is None or not any(found.groups()):
        keep = DEFAULT_CACHE
    else:
        seconds = sum(
            int(n or 0) * unit for n, unit in zip(found.groups(), _SECONDS_PER_PART, strict=True)
        )
        keep = min(max(timedelta(seconds=seconds), MIN_CACHE), MAX_CACHE)
    due = fetched_at + keep
    return min(due, valid_until) if valid_until is not None else due
