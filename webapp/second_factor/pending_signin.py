"""A sign-in waiting for its second factor: held in a sealed cookie, never in a session.

After the first factor of a user who has a second one, nothing signs the browser in: the
sign-in is sealed (``sealed_cookies``, its own purpose) into an HttpOnly cookie that lives
five minutes, and ``GET session`` answers ``null`` until the second factor is passed. The
cookie names the user, so a pending state cannot be moved to another user, and a second
sign-in in the same browser replaces it.

A pending sign-in passes once. Its cookie carries a random id; the request that passes it
writes the id's SHA-256 to ``spent_challenges`` (as a passkey challenge is spent) in its
own transaction, so the id is spent with the session it starts and not by a wrong code.
A copy of the cookie, taken before the code was typed, then finds it spent on every
worker and instance, however right its code; of copies passed at the same moment, the
unique row lets one through. ``flask auth cleanup`` deletes the rows once the cookie
could not be good anyway.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta

from flask import request
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from webapp.browser_state import cookies, sealed_cookies
from webapp.core.clock import utcnow
from webapp.sessions.store import ProviderSession
from webapp.storage.db import db
from webapp.storage.models import SpentChallenge

COOKIE = "auth.second-factor"
#: How long the second factor may take (docs/constants.md).
MAX_AGE = 300
_PURPOSE = "second-factor"
_ID_BYTES = 16


@dataclass(frozen=True)
class Signin:
    """A first factor passed: who signs in, how, and where the browser goes afterwards."""

    user_id: int
    provider: str
    callback_url: str | None
    #: How the person proved who they are so far (RFC 8176 style: fed, pwd, email, hwk, …).
    amr: tuple[str, ...]
    is_new_user: bool = False
    provider_session: ProviderSession | None = None
    #: The one-time id of the cookie that held it (None until held); see ``spend``.
    pending_id: str | None = None


def cookie_name() -> str:
    return cookies.cookie_name(COOKIE)


def hold(signin: Signin) -> None:
    """Queue the pending sign-in's cookie."""
    ps = signin.provider_session
    value = json.dumps(
        {
            "u": signin.user_id,
            "p": signin.provider,
            "c": signin.callback_url,
            "a": list(signin.amr),
            "n": signin.is_new_user,
            "s": [ps.sid, ps.sub, ps.id_token] if ps else None,
            "i": secrets.token_urlsafe(_ID_BYTES),
        }
    )
    cookies.set_cookie(
        cookie_name(),
        sealed_cookies.seal(value, purpose=_PURPOSE, bound_to=_PURPOSE, max_age=MAX_AGE),
        max_age=MAX_AGE,
    )


def pending() -> Signin | None:
    """Return this browser's pending sign-in; None if none, forged or expired."""
    token = request.cookies.get(cookie_name())
    if not token:
        return None
    opened = sealed_cookies.open_sealed(token, purpose=_PURPOSE, bound_to=_PURPOSE)
    if opened is None:
        return None
    data = json.loads(opened)
    if "i" not in data:
        return None  # held before pending sign-ins had an id (an upgrade): start again
    session = data["s"]
    return Signin(
        user_id=int(data["u"]),
        provider=str(data["p"]),
        callback_url=data["c"],
        amr=tuple(data["a"]),
        is_new_user=bool(data["n"]),
        provider_session=ProviderSession(*session) if session else None,
        pending_id=str(data["i"]),
    )


def spend(signin: Signin) -> bool:
    """Spend ``signin`` (one that ``pending`` returned) in the request's transaction;
    False when it was spent before (by a copy of its cookie, or in parallel).

    A parallel request spending it waits for this one's transaction (PostgreSQL: the
    unique row; SQLite: the one writer), so it passes only if this one's writes are
    discarded. Nothing is written when it was spent before.
    """
    try:
        with db.session.begin_nested():
            db.session.execute(
                insert(SpentChallenge).values(
                    challenge_hash=_id_hash(signin),
                    # The cookie cannot be good for longer than this after its use.
                    expires=utcnow() + timedelta(seconds=MAX_AGE),
                )
            )
    except IntegrityError:
        return False
    return True


def spent(signin: Signin) -> bool:
    """Whether ``signin`` (one that ``pending`` returned) was spent already."""
    found = db.session.execute(
        select(SpentChallenge.challenge_hash).where(
            SpentChallenge.challenge_hash == _id_hash(signin)
        )
    ).first()
    return found is not None


def _id_hash(signin: Signin) -> str:
    assert signin.pending_id is not None, "a pending sign-in read from its cookie"
    return hashlib.sha256(signin.pending_id.encode()).hexdigest()


def drop() -> None:
    """Queue the removal of the pending sign-in's cookie (if the browser sent one)."""
    if request.cookies.get(cookie_name()) is not None:
        cookies.clear_cookie(cookie_name())
