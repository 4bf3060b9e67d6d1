"""Account linking: which user a provider identity signs in, creating users and accounts.

The rules (spec §7): a known (provider, subject) signs in its user; someone already signed
in links a new account to themselves; a new account whose e-mail belongs to another user
is refused (OAuthAccountNotLinked) unless the provider allows e-mail linking and vouches
that the address is verified; otherwise a new user and account are created. Unique
constraints decide races: when two first sign-ins of one identity run at once, the loser
of the INSERT finds the winner's rows instead of creating a second user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..models import Account, User, utcnow
from .errors import AuthError
from .hooks import UserInfo, account_linked, user_created


@dataclass(frozen=True)
class Resolved:
    """The outcome of linking: the user to sign in, and what was created on the way."""

    user: User
    account: Account
    is_new_user: bool
    is_new_account: bool


def resolve_user(
    *,
    provider: str,
    provider_type: str,
    subject: str,
    info: UserInfo,
    current_user_id: int | None,
    allow_email_linking: bool,
    create_error: str,
    tokens: Mapping[str, Any] | None = None,
) -> Resolved:
    """Find or create the user for a provider identity; raise AuthError by the rules above.

    ``tokens`` (access/refresh/ID token, expires_at, scope, token_type, session_state) are
    written to the account on every sign-in so they are never stale. The caller commits.
    """
    for attempt in range(2):
        try:
            with db.session.begin_nested():
                return _resolve_once(
                    provider=provider,
                    provider_type=provider_type,
                    subject=subject,
                    info=info,
                    current_user_id=current_user_id,
                    allow_email_linking=allow_email_linking,
                    tokens=tokens or {},
                )
        except IntegrityError as exc:
            # Someone else created the user or account in the meantime: look again once.
            if attempt == 1:
                raise AuthError(create_error, f"integrity error creating user: {exc.orig}") from exc
    raise AssertionError("unreachable")


def _resolve_once(
    *,
    provider: str,
    provider_type: str,
    subject: str,
    info: UserInfo,
    current_user_id: int | None,
    allow_email_linking: bool,
    tokens: Mapping[str, Any],
) -> Resolved:
    account = db.session.execute(
        select(Account).where(
            Account.provider == provider, Account.provider_account_id == subject
        )
    ).scalar_one_or_none()

    if account is not None:
        if current_user_id is not None and account.user_id != current_user_id:
            # Linking must not move an identity between users, nor silently switch the
            # signed-in person to the identity's owner (Auth.js refuses the same way).
            raise AuthError(
                "OAuthAccountNotLinked", f"{provider} account belongs to another user"
            )
        _update_tokens(account, tokens)
        user = account.user
        if info.email_verified and info.email and user.email == info.email:
            user.email_verified = user.email_verified or utcnow()
        return Resolved(user, account, is_new_user=False, is_new_account=False)

    email = info.email
    if current_user_id is not None:
        current = db.session.get(User, current_user_id)
        if current is None:
            raise AuthError("OAuthAccountNotLinked", "signed-in user vanished")
        if email:
            other = _user_by_email(email)
            if other is not None and other.id != current.id:
                raise AuthError(
                    "OAuthAccountNotLinked", f"{provider} e-mail belongs to another user"
                )
        return _link(current, provider, provider_type, subject, tokens, is_new_user=False)

    if email:
        existing = _user_by_email(email)
        if existing is not None:
            if not (allow_email_linking and info.email_verified):
                raise AuthError(
                    "OAuthAccountNotLinked", f"{provider} account e-mail belongs to another user"
                )
            existing.email_verified = existing.email_verified or utcnow()
            return _link(existing, provider, provider_type, subject, tokens, is_new_user=False)

    user = User(
        email=email,
        name=info.name,
        image=info.image,
        email_verified=utcnow() if (email and info.email_verified) else None,
    )
    db.session.add(user)
    db.session.flush()
    user_created.send(user=user)
    return _link(user, provider, provider_type, subject, tokens, is_new_user=True)


def _link(
    user: User,
    provider: str,
    provider_type: str,
    subject: str,
    tokens: Mapping[str, Any],
    *,
    is_new_user: bool,
) -> Resolved:
    account = Account(
        user=user, type=provider_type, provider=provider, provider_account_id=subject
    )
    _update_tokens(account, tokens)
    db.session.add(account)
    db.session.flush()
    account_linked.send(user=user, account=account)
    return Resolved(user, account, is_new_user=is_new_user, is_new_account=True)


_TOKEN_FIELDS = (
    "access_token",
    "refresh_token",
    "id_token",
    "expires_at",
    "scope",
    "token_type",
    "session_state",
)


def _update_tokens(account: Account, tokens: Mapping[str, Any]) -> None:
    for name in _TOKEN_FIELDS:
        if name in tokens:
            setattr(account, name, tokens[name])


def _user_by_email(email: str) -> User | None:
    return db.session.execute(select(User).where(User.email == email)).scalar_one_or_none()
