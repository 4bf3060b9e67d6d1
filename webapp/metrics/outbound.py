"""What leaves the app, timed and counted where it goes out: each HTTP request to an identity
provider (``webapp.oauth``, and ``webapp.saml`` for its IdP's metadata: ``timed_request``
around each one) and each message handed to
the mail transport (``webapp.mail``: ``delivering``).

A provider request is named by the provider's configured id and the endpoint's name in
``ENDPOINTS``, never by its URL (which may carry a token). Its outcome is its HTTP answer's
class, or why there was none; what the answer said (an OAuth error) is the caller's to
judge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import requests

from webapp.metrics.families import (
    EMAIL_SECONDS,
    EMAILS,
    OTHER,
    PROVIDER_REQUEST_SECONDS,
    PROVIDER_REQUESTS,
    bounded,
)

#: The endpoints of an identity provider the app calls, as the labels name them.
ENDPOINTS = frozenset(
    {
        "discovery",  # /.well-known/openid-configuration
        "server_metadata",  # RFC 8414's /.well-known/oauth-authorization-server
        "jwks",
        "token",  # the authorization code's exchange
        "token_refresh",  # a refresh token's use
        "token_device",  # a device sign-in's poll
        "device_authorization",
        "revocation",
        "introspection",
        "userinfo",
        "profile",  # a preset's other profile calls (GitHub's e-mail addresses)
        "saml_metadata",  # a SAML identity provider's metadata document
    }
)


def timed_request(
    provider: str, endpoint: str, send: Callable[[], requests.Response]
) -> requests.Response:
    """Make one request to a provider (``send``), counting and timing it by ``provider``
    (its configured id) and ``endpoint`` (one of ``ENDPOINTS``); its exceptions pass."""
    began = time.perf_counter()
    outcome = "unreachable"
    try:
        response = send()
        outcome = _answer_class(response.status_code)
        return response
    except requests.Timeout:
        outcome = "timeout"
        raise
    finally:
        named = bounded(endpoint, ENDPOINTS)
        PROVIDER_REQUESTS.labels(provider, named, outcome).inc()
        PROVIDER_REQUEST_SECONDS.labels(provider, named).observe(time.perf_counter() - began)


def _answer_class(status: int) -> str:
    if 200 <= status < 300:
        return "ok"
    if 400 <= status < 600:
        return f"{status // 100}xx"
    return OTHER


@contextmanager
def delivering(message: str) -> Iterator[None]:
    """Time handing the message ``message`` (its template's name) to the mail transport:
    ``sent`` unless it raises (``failed``)."""
    began = time.perf_counter()
    outcome = "failed"
    try:
        yield
        outcome = "sent"
    finally:
        EMAILS.labels(message, outcome).inc()
        EMAIL_SECONDS.labels(outcome).observe(time.perf_counter() - began)
