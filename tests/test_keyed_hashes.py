"""Keyed hashes (``webapp.core.keyed_hashes``) stay byte for byte what they are: stored values
are found by them (rate-limit counter keys, the audit trail's ``subject_hash``, the
known-browser cookie, e-mail link, code and browser hashes, the bearer cache, a passkey's
user handle at the authenticator). Each purpose's hash is checked against an HMAC computed
here from ``Settings.derive_key``, and against the value it has today, so a change to the
helper, the key derivation, an encoding or a truncation fails here first.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from webapp.audit import throttles as ratelimit
from webapp.audit import trail as audit
from webapp.core.keyed_hashes import keyed_digest, keyed_hash, keyed_hashes
from webapp.flows import bearer
from webapp.passkeys import relying_party as passkeys
from webapp.settings import Settings, install, load_settings

SECRET = "pinned-secret-" + "k" * 40
PREVIOUS = "previous-secret-" + "o" * 40


@pytest.fixture
def conf(tmp_path: Path) -> Iterator[Settings]:
    """Settings with a fixed secret and one previous secret, in an app context."""
    conf = load_settings(
        {
            "APP_ENV": "development",
            "AUTH_SECRET": SECRET,
            "AUTH_PREVIOUS_SECRETS": PREVIOUS,
            "AUTH_URL": "http://localhost/auth",
        },
        instance_path=tmp_path,
    )
    app = Flask(__name__)
    install(app, conf)
    with app.app_context():
        yield conf


def independent_hmac(conf: Settings, purpose: str, value: str, secret: str | None = None) -> bytes:
    key = conf.derive_key(purpose, secret)
    return hmac.new(key, value.encode(), hashlib.sha256).digest()


#: (purpose, value, how the app makes its hash, the hex digits it keeps, the hash today).
PINNED: list[tuple[str, str, Callable[[], str], int, str]] = [
    (
        "throttle-identifier",
        "ann@example.com",
        lambda: ratelimit.identifier_hash("ann@example.com"),
        32,
        "bd6731a4c8cfbc7758d033eaa6015cb2",
    ),
    (
        "throttle-identifier",
        "ann@example.com",
        lambda: audit.subject_hash(" Ann@Example.com "),  # of the address's normal form
        32,
        "bd6731a4c8cfbc7758d033eaa6015cb2",
    ),
    (
        "bearer-cache",
        "an-access-token",
        lambda: bearer._cache_key("an-access-token"),
        64,
        "ce20dad11ed9ba3a527b3a0e44a1f93d76ff9ed356076f4318564af0f2714680",
    ),
    (
        "passkey-user-handle",
        "42",
        lambda: passkeys.user_handle(42).hex(),
        32,
        "3c1bc9df735fb0ef3d4d277702edb7fb",
    ),
    (
        "email-token",
        "a-link-token",
        lambda: keyed_hash("email-token", "a-link-token"),
        64,
        "4424cf16089b2a847ccd185833c1474e338cf4b4dc89876e3e08ccde83c22fb5",
    ),
    (
        "email-code",
        "123456",
        lambda: keyed_hash("email-code", "123456"),
        64,
        "c2d877c76ddee6c95108bb92c65554cfe59216472db4aed72144ea766272f7b8",
    ),
    (
        "email-browser",
        "a-browser-id",
        lambda: keyed_hash("email-browser", "a-browser-id"),
        64,
        "4717e1fcce5ca116594dad3c12eec73292bde8448b0ae51a61e101e8056d10ae",
    ),
]


@pytest.mark.parametrize(
    ("purpose", "value", "made", "digits", "today"),
    PINNED,
    ids=[f"{row[0]}-{n}" for n, row in enumerate(PINNED)],
)
def test_each_keyed_hash_is_the_hmac_it_was(
    conf: Settings,
    purpose: str,
    value: str,
    made: Callable[[], str],
    digits: int,
    today: str,
) -> None:
    expected = independent_hmac(conf, purpose, value).hex()[:digits]
    assert made() == expected == today


def test_the_helper_is_hmac_sha256_under_the_purpose_key(conf: Settings) -> None:
    digest = independent_hmac(conf, "some-purpose", "välue")
    assert keyed_digest("some-purpose", "välue") == digest
    assert keyed_hash("some-purpose", "välue") == digest.hex()
    assert keyed_hash("some-purpose", "välue", length=32) == digest.hex()[:32]
    assert keyed_hash("another-purpose", "välue") != digest.hex()


@pytest.mark.parametrize(
    ("purpose", "value", "today"),
    [
        (
            "email-token",
            "a-link-token",
            [
                "4424cf16089b2a847ccd185833c1474e338cf4b4dc89876e3e08ccde83c22fb5",
                "2ba9f66119dab06050cb82747949cdfa303b80d27e59af131a9eb2b0a8f487cd",
            ],
        ),
        (
            "email-code",
            "123456",
            [
                "c2d877c76ddee6c95108bb92c65554cfe59216472db4aed72144ea766272f7b8",
                "01e4ff1564472dfd9c1ee633a7503b9cb8d8d0bb057fb5e04241dcb8e56de4ec",
            ],
        ),
        (
            "email-browser",
            "a-browser-id",
            [
                "4717e1fcce5ca116594dad3c12eec73292bde8448b0ae51a61e101e8056d10ae",
                "bf9ac98e56aad227dffdd4e9567c9547294440154b3ad7ea8c7c364edd29bdd1",
            ],
        ),
    ],
)
def test_hashes_under_previous_secrets_follow_the_current_one(
    conf: Settings, purpose: str, value: str, today: list[str]
) -> None:
    expected = [
        independent_hmac(conf, purpose, value, secret).hex() for secret in (SECRET, PREVIOUS)
    ]
    assert keyed_hashes(purpose, value) == expected == today
