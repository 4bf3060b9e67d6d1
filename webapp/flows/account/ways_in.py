"""The user's ways in, as the account area reads and shows them, and the rule that one
always remains: the page offers "Remove" by it, and unlinking a provider or removing a
passkey are refused by it, so they must count the same ways in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import select

from webapp.errors import AccountError
from webapp.i18n import gettext
from webapp.providers import provider_name, providers
from webapp.providers.email import EmailProvider
from webapp.storage.db import db
from webapp.storage.models import Account, Authenticator, User

#: Provider types a signed-in person can link with one button (a redirect round trip).
LINKABLE_TYPES = frozenset({"oidc", "oauth"})

#: A row that is not the user's, or is gone: every use case here refuses with it.
NOT_FOUND = "NotFound"
LAST_METHOD = "LastSignInMethod"


def account_gone() -> AccountError:
    """The refusal of an account use case whose user was deleted while its page was open."""
    return AccountError(NOT_FOUND, gettext("This account no longer exists."))


class ShownUser(Protocol):
    """What the account area reads of a user: a ``User`` or a row of those columns."""

    id: int
    name: str | None
    email: str | None
    email_verified: datetime | None
    image: str | None
    created_at: datetime


class ShownAccount(Protocol):
    """What the account area reads of a linked account: an ``Account`` or such a row."""

    id: int
    provider: str
    type: str
    provider_account_id: str
    created_at: datetime


class ShownPasskey(Protocol):
    """What the account area reads of a passkey: an ``Authenticator`` or such a row."""

    id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    backed_up: bool


@dataclass(frozen=True)
class SignInMethod:
    """One of the user's ways to sign in, as the account area lists it (an Account row)."""

    id: int
    provider: str
    provider_name: str
    type: str
    created_at: datetime
    #: The e-mail provider's row for the user's verified address. E-mail sign-in follows
    #: from the address itself (a link to it finds this user, row or not, and writes the row
    #: again), so removing the row would change nothing: the page shows it as the e-mail
    #: way in, never with "Remove", and ``unlink_account`` refuses it.
    follows_address: bool = False

    @classmethod
    def of(cls, account: ShownAccount, user: ShownUser) -> SignInMethod:
        return cls(
            account.id,
            account.provider,
            provider_name(account.provider),
            account.type,
            account.created_at,
            follows_address=follows_address(account, user),
        )


@dataclass(frozen=True)
class EmailSignIn:
    """E-mail sign-in as one of the user's ways in: a link or code sent to the address."""

    provider_id: str
    provider_name: str
    address: str


@dataclass(frozen=True)
class LinkOption:
    """A provider the user can link as one more way in."""

    id: str
    name: str


@dataclass(frozen=True)
class PasskeyInfo:
    """One of the user's passkeys, as the account page lists it."""

    id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    #: Synced to the person's other devices (a cloud account), or bound to one device.
    synced: bool

    @classmethod
    def of(cls, row: ShownPasskey) -> PasskeyInfo:
        return cls(row.id, row.name, row.created_at, row.last_used_at, row.backed_up)


def email_signin(user: ShownUser) -> EmailSignIn | None:
    """E-mail sign-in for ``user``, when a link or code sent to their address signs them
    in: an e-mail provider is configured and the address is verified. A link to an
    unverified address signs in a new user of its own, never this one (the linking rules,
    webapp/flows/signin/identity.py), so it is no way in here."""
    if not user.email or user.email_verified is None:
        return None
    provider = email_provider()
    if provider is None:
        return None
    return EmailSignIn(provider.id, provider.name, user.email)


def email_provider() -> EmailProvider | None:
    """The configured e-mail provider (the first, if several): what e-mail sign-in and a
    change of address send their messages through. None: no mail goes out."""
    return next((p for p in providers().values() if isinstance(p, EmailProvider)), None)


def follows_address(account: ShownAccount, user: ShownUser) -> bool:
    """Whether ``account`` is an e-mail provider's row for the user's verified address."""
    provider = providers().get(account.provider)
    return (
        provider is not None
        and provider.type == "email"
        and user.email_verified is not None
        and account.provider_account_id == user.email
    )


def accounts_of(user_id: int) -> list[Account]:
    return list(
        db.session.scalars(select(Account).where(Account.user_id == user_id).order_by(Account.id))
    )


def passkeys_of(user_id: int) -> list[Authenticator]:
    return list(
        db.session.scalars(
            select(Authenticator).where(Authenticator.user_id == user_id).order_by(Authenticator.id)
        )
    )


def locked_user(user_id: int) -> User | None:
    """The user's row, locked until the request's writes are committed: removals of one
    user's ways in are decided one at a time, each seeing what the one before removed
    (the "last method" check and the delete would otherwise both pass in two parallel
    requests). PostgreSQL: ``SELECT … FOR NO KEY UPDATE``, which new rows naming the user
    (a session, an event) do not wait for. SQLite has one writer: the request's first
    statement took its lock (``BEGIN IMMEDIATE``, webapp/storage/database.py). Read the user's
    methods after this, never before."""
    return db.session.get(User, user_id, with_for_update={"key_share": True})


def passkeys_offered() -> bool:
    return any(p.type == "webauthn" for p in providers().values())


def leaves_a_method(
    user: ShownUser, accounts: Sequence[ShownAccount], passkeys: Sequence[ShownPasskey]
) -> bool:
    """Whether the user keeps a way to sign in after removing one of ``accounts`` or
    ``passkeys``: e-mail sign-in to the verified address, another linked provider, or
    another passkey (while passkeys are on). Without e-mail sign-in no row follows from
    the address, so every row counts."""
    if email_signin(user) is not None:
        return True
    return len(accounts) + (len(passkeys) if passkeys_offered() else 0) > 1
