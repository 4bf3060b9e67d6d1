"""For tests/saml: the app with the SimpleSAMLphp IdP as its saml provider (``saml_app``),
and pysaml2's leftovers kept within these tests.

pysaml2 leaves its temporary copies of the IdP's certificates, and of a document whose
signature fails, open when it refuses them (``sigver.SecurityContext._check_signature``
and ``CryptoBackendXmlSec1.validate_signature`` raise with them in hand); the
garbage collector closes them later, with a ResourceWarning, in whatever test then runs.
Here that warning is ignored, and each module ends with a collection, so that none is left
for the modules after.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from .signin_steps import provider_entry
from .simplesamlphp import SimpleSamlIdp

PYSAML2_TEMP_FILES = pytest.mark.filterwarnings(
    r"ignore:unclosed file <_io\.\w+ name='[^']*\.(pem|xml)'.*:ResourceWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(PYSAML2_TEMP_FILES)


@pytest.fixture(scope="module", autouse=True)
def pysaml2_leftovers_closed() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture
def saml_app(make_oauth_app: Callable[..., Flask], simplesamlphp: SimpleSamlIdp) -> Flask:
    return make_oauth_app([provider_entry(simplesamlphp)])
