"""The identity provider's metadata (its entity ID, its SSO endpoint, its signing keys):
read from ``idp_metadata_file`` at start-up, or fetched from ``idp_metadata_url`` when the
service provider first needs it; ``service_provider`` keeps what it builds from a usable
document for the process's lifetime, so a failed fetch or an unusable document is tried
again at the next sign-in. Nothing is fetched at start-up, so an IdP that is down does not
stop the application. Refreshing it (its own validUntil/cacheDuration, a bound) is to come.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import requests

from webapp.saml.config import SamlConfig
from webapp.settings import ConfigError

#: The largest metadata document read: one IdP's is a few kilobytes.
MAX_BYTES = 1 << 20


class MetadataUnavailable(Exception):
    """The IdP's metadata could not be fetched, or is not a usable document."""


def source(config: SamlConfig, timeouts: tuple[float, float]) -> Callable[[], str]:
    """What returns ``config``'s IdP metadata: the file's text, read now (raise
    ConfigError), or the URL's document, fetched each time it is asked for."""
    if config.idp_metadata_file is not None:
        text = _read_file(config.id, config.idp_metadata_file)
        return lambda: text
    assert config.idp_metadata_url is not None
    return partial(_fetch, config.idp_metadata_url, timeouts)


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


def _fetch(url: str, timeouts: tuple[float, float]) -> str:
    """``url``'s document; raise MetadataUnavailable."""
    try:
        with requests.get(url, timeout=timeouts, allow_redirects=False, stream=True) as answer:
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
