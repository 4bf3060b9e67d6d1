"""The settings every test app starts from (``base_config``, ``TEST_SECRET``), the throttles'
settings (for tests that raise or lower them all), and whether the suite runs under CI
(``IN_CI``: there a missing service fails the run, elsewhere its tests are skipped)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, Protocol, TypeVar

import pytest

TEST_SECRET = "test-secret-" + "x" * 40
IN_CI = os.environ.get("CI", "").lower() == "true"


def missing_service(message: str) -> NoReturn:
    """Skip the calling test for a service that is not here; fail it under CI=true."""
    if IN_CI:
        pytest.fail(message + " (CI=true: a missing service is a failure)", pytrace=False)
    pytest.skip(message)


class Service(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Service)


def started(service: S) -> Iterator[S]:
    """A fixture's body: start ``service``, yield it, stop it."""
    service.start()
    try:
        yield service
    finally:
        service.stop()


def running(make: Callable[[], S], missing: type[Exception]) -> Iterator[S]:
    """A session fixture's body: make the service (``missing`` raised: ``missing_service``),
    then as ``started``."""
    try:
        service = make()
    except missing as exc:
        missing_service(str(exc))
    yield from started(service)


#: The sign-in throttles' settings: credentials, e-mail requests, second-factor codes.
SIGNIN_THROTTLES = (
    "AUTH_CREDENTIALS_IP_LIMIT",
    "AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT",
    "AUTH_CREDENTIALS_IDENTIFIER_LIMIT",
    "EMAIL_ADDRESS_IP_LIMIT",
    "EMAIL_ADDRESS_LIMIT",
    "EMAIL_IP_LIMIT",
    "AUTH_SECOND_FACTOR_LIMIT",
    "AUTH_SECOND_FACTOR_IP_LIMIT",
)
#: Those and the throttles of what a signed-out browser starts: code exchanges, device
#: sign-ins, passkey ceremonies.
BROWSER_THROTTLES = (
    *SIGNIN_THROTTLES,
    "AUTH_OAUTH_IP_LIMIT",
    "AUTH_DEVICE_IP_LIMIT",
    "AUTH_PASSKEY_IP_LIMIT",
)


def base_config(database_url: str, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "APP_ENV": "development",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "http://localhost/auth",
        "DATABASE_URL": database_url,
        "TESTING": True,
    }
    config.update(overrides)
    return config
