"""Fixtures of the interop tests: identity providers the suite starts itself, each once per
test session, on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..support.config import running, started
from .dot_provider import DotProvider
from .glewlwyd_provider import Glewlwyd, GlewlwydMissing


@pytest.fixture(scope="session")
def dot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DotProvider]:
    """django-oauth-toolkit (tests/interop/django_provider) on a loopback port, with its own
    SQLite database, for the whole test session."""
    yield from started(DotProvider(tmp_path_factory.mktemp("django-oauth-toolkit")))


@pytest.fixture(scope="session")
def glewlwyd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Glewlwyd]:
    """Glewlwyd (Debian's package; tests/interop/glewlwyd) on a loopback port, with its own
    SQLite database and a signing key made for this test session, configured through its
    admin API. Not installed: its tests are skipped, except under CI=true, where that is a
    failure."""
    folder = tmp_path_factory.mktemp("glewlwyd")
    yield from running(lambda: Glewlwyd(folder), GlewlwydMissing)
