"""Application hooks (authorize, sign-in, redirect, session, mail transport) and the Blinker
signals.

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
from email.message import EmailMessage
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
#: Sent for every row the audit trail writes (docs/audit.md), once it is committed: with the
#: request's writes, or on its own for a failure kept when they are discarded, or in its own
#: transaction (a session's daily extension, a provider token's refresh); never for a row
#: that is rolled back (a refused sign-in's successes, a savepoint lost to a race). The
#: sender is the event type, a string (``"signin"``, ``"session.revoked"``; connect with
#: ``sender=`` for one type); the keyword arguments are the row's columns: ``occurred_at``
#: (aware, UTC), ``outcome`` ("success" or "failure"), ``error_code`` (None for a success),
#: ``user_id`` (the user it names, or None), ``subject_hash`` (the keyed hash of the address
#: or identifier an event names when it names no user, else None), ``provider``, ``ip``,
#: ``device`` ("Firefox on Linux"), ``request_id`` (None outside a request) and ``detail``
#: (a dict of short values, or None). None of them holds a secret.
audit_event = _signals.signal("audit-event")


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
    #: ``(message: EmailMessage) -> None``: delivers every message (the sign-in mail, the
    #: security notices) in place of SMTP or the outbox; any exception it raises is a
    #: failed delivery. Messages are still composed from the settings (EMAIL_FROM, ...).
    send_mail: Callable[[EmailMessage], object] | None = None

    def authorize_credentials(self, fn: F) -> F:
        """Decorator: ``fn(form)`` checks a credentials provider's form and returns a
        ``UserInfo`` (signed in) or None (``CredentialsSignin``)."""
        self.authorize = fn
        return fn

    def on_signin(self, fn: F) -> F:
        """Decorator: ``fn(user, provider, profile)`` decides a sign-in before anything is
        committed: False refuses it (``AccessDenied``), a string sends the browser there
        instead, anything else lets it go on."""
        self.signin = fn
        return fn

    def on_redirect(self, fn: F) -> F:
        """Decorator: ``fn(url, base_url)`` returns where the browser goes after a sign-in
        or sign-out (``url`` is already checked to be on this site)."""
        self.redirect = fn
        return fn

    def on_session(self, fn: F) -> F:
        """Decorator: ``fn(user, session)`` returns extra fields for ``GET session``."""
        self.session = fn
        return fn

    def mail_transport(self, fn: F) -> F:
        """Decorator: ``fn(message)`` delivers every message in place of SMTP or the
        outbox; an exception it raises is a failed delivery."""
        self.send_mail = fn
        return fn


def current_hooks() -> AuthHooks:
    """Return the hooks of the running application."""
    hooks: AuthHooks = current_app.extensions["webapp.hooks"]
    return hooks
