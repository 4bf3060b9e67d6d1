"""Passkey challenges: one per ceremony, sealed in the browser, spent at its first use.

``webauthn-options`` puts a fresh random challenge into an HttpOnly cookie, sealed
(``sealed_cookies``: AES-GCM, 900 s) and bound to the ceremony it is for
(``authenticate``, or ``register:<user id>``), so it cannot be read, forged, or moved to
another ceremony or user. The callback takes it back before it checks anything: the
cookie is cleared and the challenge's SHA-256 written to ``spent_challenges`` on its own
committed connection (``database.write_now``), so a refused attempt spends it as surely
as a good one, and a second use (a replayed response, a parallel request, a copy of the
cookie) finds it spent on every worker and instance. Rows go once their cookies would
have expired anyway: a few with each new one, the rest by ``flask auth cleanup``.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from flask import request
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from webapp.browser_state import cookies, sealed_cookies
from webapp.core.clock import utcnow
from webapp.core.sealing import b64url_decode, b64url_encode
from webapp.settings import current_settings
from webapp.storage.database import PRUNE_BATCH, delete_at_most, write_now
from webapp.storage.models import SpentChallenge

COOKIE = "auth.passkey-challenge"
#: How long a ceremony may take, from the options to the callback (docs/constants.md).
MAX_AGE = 900
CHALLENGE_BYTES = 32
_PURPOSE = "passkey-challenge"


def _name() -> str:
    return cookies.cookie_name(COOKIE)


def _path() -> str:
    # Only the auth routes (options and callback) need it.
    return current_settings().base_path or "/"


def issue(bound_to: str) -> bytes:
    """Return a new challenge and queue its sealed cookie (it replaces any earlier one)."""
    challenge = secrets.token_bytes(CHALLENGE_BYTES)
    sealed = sealed_cookies.seal(
        b64url_encode(challenge), purpose=_PURPOSE, bound_to=bound_to, max_age=MAX_AGE
    )
    cookies.set_cookie(_name(), sealed, max_age=MAX_AGE, path=_path())
    return challenge


def take(bound_to: str) -> bytes | None:
    """Spend this browser's challenge for ``bound_to`` and return it; None when there is
    none, it was sealed for another ceremony, expired, or was spent before.

    Call it before the request's transaction begins (before any ORM query): the spend is
    committed on a connection of its own, which on SQLite waits for the request's lock.
    """
    token = request.cookies.get(_name())
    if not token:
        return None
    cookies.clear_cookie(_name(), path=_path())
    value = sealed_cookies.open_sealed(token, purpose=_PURPOSE, bound_to=bound_to)
    if value is None:
        return None
    challenge = b64url_decode(value)
    now = utcnow()
    try:
        write_now(
            insert(SpentChallenge).values(
                challenge_hash=hashlib.sha256(challenge).hexdigest(),
                # The cookie cannot be good for longer than this after its use.
                expires=now + timedelta(seconds=MAX_AGE),
            ),
            delete_at_most(
                SpentChallenge.challenge_hash, SpentChallenge.expires <= now, limit=PRUNE_BATCH
            ),
        )
    except IntegrityError:
        return None
    return challenge
