"""Application hooks (authorize, sign-in, redirect, session) and the Blinker signals.

Hooks change what happens; signals only tell. An application registers hooks on the
``AuthHooks`` it passes to ``create_app`` (or on ``current_hooks()`` at set-up time)::

    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form):            # -> UserInfo | None
        ...

    app = create_app(hooks=hooks)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from blinker import Namespace
from flask import current_app

_signals = Namespace()
#: Sent with ``user`` (AuthUser), ``provider`` and ``is_new_user`` after a session is created.
signed_in = _signals.signal("signed-in")
#: Sent with ``user_id`` and ``session_id`` after a session is deleted by sign-out.
signed_out = _signals.signal("signed-out")
#: Sent with ``provider``, ``session_ids`` and ``user_ids`` after a provider's back-channel
#: logout deleted sessions (both lists may be empty: nothing matched).
provider_signed_out = _signals.signal("provider-signed-out")
#: Sent with ``user`` (the new User row) once a new user is committed; not when the
#: sign-in that made it is refused (its rows are discarded).
user_created = _signals.signal("user-created")
#: Sent with ``user`` and ``account`` once an account newly linked to a user is committed;
#: not when the sign-in that linked it is refused.
account_linked = _signals.signal("account-linked")
#: Sent with ``user`` and ``session`` (the session JSON payload) when a session is read.
session_read = _signals.signal("session-read")
#: Sent with ``user_id``, ``provider``, ``account_id`` and ``reason`` when revoking an
#: account's tokens at its provider failed (the unlink or deletion went ahead): count it.
revocation_failed = _signals.signal("revocation-failed")


@dataclass(frozen=True)
class UserInfo:
    """Who a provider says the person is; the flows turn it into a User row."""

    email: str | None
    name: str | None = None
    image: str | None = None
    #: The identifier the provider knows the person by (credentials: usually the e-mail).
    subject: str | None = None
    email_verified: bool = False


F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class AuthHooks:
    """The callbacks an application can register; each is optional."""

    #: ``(form: Mapping[str, str]) -> UserInfo | None`` for the credentials provider.
    authorize: Callable[[Mapping[str, str]], UserInfo | None] | None = None
    #: ``(user, provider, profile) -> bool | str``: False denies, a string redirects there.
    signin: Callable[..., bool | str] | None = None
    #: ``(url, base_url) -> str``: where to go after a flow (url is already checked safe).
    redirect: Callable[..., str] | None = None
    #: ``(user, session) -> dict``: extra fields for the session JSON.
    session: Callable[..., Mapping[str, Any]] | None = None

    def authorize_credentials(self, fn: F) -> F:
        self.authorize = fn
        return fn

    def on_signin(self, fn: F) -> F:
        self.signin = fn
        return fn

    def on_redirect(self, fn: F) -> F:
        self.redirect = fn
        return fn

    def on_session(self, fn: F) -> F:
        self.session = fn
        return fn


def current_hooks() -> AuthHooks:
    """Return the hooks of the running application."""
    hooks: AuthHooks = current_app.extensions["webapp.hooks"]
    return hooks
