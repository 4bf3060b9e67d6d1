"""A sign-in waiting for its second factor: held in a sealed cookie, never in a session.

After the first factor of a user who has a second one, nothing signs the browser in: the
sign-in is sealed (``sealed_cookies``, its own purpose) into an HttpOnly cookie that lives
five minutes, and ``GET session`` answers ``null`` until the second factor is passed. The
cookie names the user, so a pending state cannot be moved to another user, and a second
sign-in in the same browser replaces it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from flask import request

from webapp.auth import cookies, sealed_cookies
from webapp.auth.sessions import ProviderSession

COOKIE = "auth.second-factor"
#: How long the second factor may take (docs/constants.md).
MAX_AGE = 300
_PURPOSE = "second-factor"


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
    session = data["s"]
    return Signin(
        user_id=int(data["u"]),
        provider=str(data["p"]),
        callback_url=data["c"],
        amr=tuple(data["a"]),
        is_new_user=bool(data["n"]),
        provider_session=ProviderSession(*session) if session else None,
    )


def drop() -> None:
    """Queue the removal of the pending sign-in's cookie (if the browser sent one)."""
    if request.cookies.get(cookie_name()) is not None:
        cookies.clear_cookie(cookie_name())
