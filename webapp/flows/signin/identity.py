"""Which user a provider identity signs in (the linking rules), creating users and accounts.

The rules (the table is in docs/security.md, "Account linking"): a
known (provider, subject) signs in its user; someone already signed in links a new
account to themselves; otherwise an address counts only when it is verified. A verified
address another user owns joins that user if the provider may link by e-mail, else
OAuthAccountNotLinked; a verified address nobody owns makes a new user, who takes it from
any unverified holders; an unverified address always makes a new user of its own, so it
can neither pre-hijack the owner's account nor tell a prober that the owner exists.
Unique constraints decide races: when two first sign-ins of one identity or one verified
address run at once, the loser of the INSERT finds the winner's rows instead. The
``user_created`` and ``account_linked`` signals are queued for what the savepoint kept and
sent once the request commits it: never for rows that a lost race, the sign-in hook's
refusal or a failed request discards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from webapp.audit import trail
from webapp.core.clock import utcnow
from webapp.core.hooks import UserInfo, account_linked, user_created
from webapp.errors import AuthError
from webapp.flows import notices
from webapp.flows.sso import joins, routing
from webapp.mail.email_addresses import address_or_none
from webapp.settings import current_settings
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import Account, User

log = logging.getLogger(__name__)

#: Longest picture URL kept; longer ones are dropped, not cut (a cut URL is another URL).
MAX_PICTURE_URL = 2048


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

    ``tokens`` (``account_columns`` of the token response) are written to the account on
    every sign-in so they are never stale (committed with the request).
    """
    if info.email is not None and address_or_none(info.email) != info.email:
        # Each flow normalises its source's address; this is the last check before a row.
        raise AuthError(create_error, "the address is not in the normal form")
    # Before anything is written: a domain with enforce_domain has one way in.
    routing.refuse_other_ways_in(provider, info.email)
    for attempt in range(2):
        try:
            with db.session.begin_nested():
                resolved = _resolve_once(
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
        else:
            _announce_once_committed(resolved)
            if resolved.is_new_account and not resolved.is_new_user and provider_type != "email":
                # A new way into an existing account. (E-mail sign-in follows from the
                # address the message went to: no news to its owner.)
                notices.method_changed(resolved.user.id, provider=provider, added=True)
            return resolved
    raise AssertionError("unreachable")


def _announce_once_committed(resolved: Resolved) -> None:
    """Queue the signals for the user and account ``resolved`` created (none for rows that
    were already there)."""
    user, account = resolved.user, resolved.account
    if resolved.is_new_user:
        transactions.on_commit(lambda: user_created.send(user=user))
    if resolved.is_new_account:
        transactions.on_commit(lambda: account_linked.send(user=user, account=account))


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
        select(Account).where(Account.provider == provider, Account.provider_account_id == subject)
    ).scalar_one_or_none()

    if account is not None:
        if current_user_id is not None and account.user_id != current_user_id:
            # Linking must not move an identity between users, nor silently switch the
            # signed-in person to the identity's owner (Auth.js refuses the same way).
            raise AuthError("OAuthAccountNotLinked", f"{provider} account belongs to another user")
        _update_tokens(account, tokens)
        _confirm_address(account.user, info)
        return Resolved(account.user, account, is_new_user=False, is_new_account=False)

    # Only a verified claim names an owner: an unverified one is just what someone typed.
    email = info.email
    owner = owner_of(email) if email and info.email_verified else None
    if current_user_id is not None:
        current = db.session.get(User, current_user_id)
        if current is None:
            raise AuthError("OAuthAccountNotLinked", "signed-in user vanished")
        if owner is not None and owner.id != current.id:
            raise AuthError("OAuthAccountNotLinked", f"{provider} e-mail belongs to another user")
        resolved = _link(current, provider, provider_type, subject, tokens, is_new_user=False)
        _confirm_address(current, info)
        return resolved

    if owner is not None and email is not None:
        # A provider declared for the address's domain joins its owner, once.
        by_domain = joins.may_join(provider, owner, email)
        if not (allow_email_linking or by_domain):
            # The claim is verified, so this tells the prover only what they proved.
            raise AuthError(
                "OAuthAccountNotLinked", f"{provider} account e-mail belongs to another user"
            )
        resolved = _link(owner, provider, provider_type, subject, tokens, is_new_user=False)
        if by_domain:
            joins.record_join(resolved.account, email)
        return resolved

    # A new user, whether or not someone else owns an unverified claim's address: the
    # answer must not depend on it (a prober would learn who has an account).
    verified = bool(email and info.email_verified)
    user = User(
        email=email,
        name=info.name,
        image=picture_url(info.image, allow_http=current_settings().is_development),
        email_verified=utcnow() if verified else None,
    )
    db.session.add(user)
    db.session.flush()
    if verified and email:
        withdraw_unverified_claims(email, owner=user)
    trail.record(trail.Event.ACCOUNT_CREATED, user_id=user.id, provider=provider)
    return _link(user, provider, provider_type, subject, tokens, is_new_user=True)


def picture_url(url: str | None, *, allow_http: bool) -> str | None:
    """Return ``url`` if it is safe to store as a profile picture, else None.

    Safe: an absolute ``https:`` URL (``http:`` too when ``allow_http``, i.e. in
    development) with a host, no user-info, no control characters or spaces, at most
    MAX_PICTURE_URL long. The value comes from a provider's profile or an app's hook and
    ends up in ``<img src>`` and the session JSON: ``javascript:`` or ``data:`` would be
    script or content the provider chose, a relative or schemeless URL a request to this
    site (or wherever a client resolves it), plain ``http:`` mixed content.
    """
    if not url or len(url) > MAX_PICTURE_URL:
        return None
    # urlsplit silently drops tabs and newlines and strips leading controls: check first.
    if any(ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in url):
        return None
    try:
        parts = urlsplit(url)
        if parts.port == 0:  # .port also raises ValueError for one that is not a number
            return None
    except ValueError:
        return None
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname or "@" in parts.netloc:
        return None
    return url


def _link(
    user: User,
    provider: str,
    provider_type: str,
    subject: str,
    tokens: Mapping[str, Any],
    *,
    is_new_user: bool,
) -> Resolved:
    account = Account(user=user, type=provider_type, provider=provider, provider_account_id=subject)
    _update_tokens(account, tokens)
    db.session.add(account)
    db.session.flush()
    trail.record(
        trail.Event.ACCOUNT_LINKED,
        user_id=user.id,
        provider=provider,
        detail={"account": account.id, "type": provider_type},
    )
    return Resolved(user, account, is_new_user=is_new_user, is_new_account=True)


def account_columns(token: Mapping[str, Any]) -> dict[str, Any]:
    """A token endpoint's answer as account columns.

    The access token and its expiry always; refresh token, ID token, scope, token type and
    session state only when given, so a refresh that omits them keeps the stored ones
    (RFC 6749 §6: no new refresh token means the old one still works).
    """
    expires_at = token.get("expires_at")
    columns: dict[str, Any] = {
        "access_token": token.get("access_token"),
        "expires_at": datetime.fromtimestamp(expires_at, UTC)
        if isinstance(expires_at, int | float)
        else None,
    }
    for name in ("refresh_token", "id_token", "scope", "token_type", "session_state"):
        if token.get(name):
            columns[name] = token[name]
    return columns


def _update_tokens(account: Account, tokens: Mapping[str, Any]) -> None:
    for name, value in tokens.items():
        setattr(account, name, value)


def owner_of(email: str) -> User | None:
    """Return the user whose address ``email`` is verified (at most one, by the index)."""
    return db.session.execute(
        select(User).where(User.email == email, User.email_verified.is_not(None))
    ).scalar_one_or_none()


def _confirm_address(user: User, info: UserInfo) -> None:
    """Mark ``user``'s own address verified when ``info`` vouches for it, if it is free.

    An address another user already owns stays unverified here, quietly: the sign-in
    itself is fine, the address just is not this user's to own.
    """
    email = info.email
    if not (email and info.email_verified and user.email == email):
        return
    if user.email_verified is not None:
        return
    if owner_of(email) is not None:
        return
    user.email_verified = utcnow()
    # Flushed here, inside the savepoint: a concurrent owner's INSERT makes this fail where
    # resolve_user can retry, not at commit.
    db.session.flush()
    withdraw_unverified_claims(email, owner=user)


def withdraw_unverified_claims(email: str, *, owner: User) -> None:
    """Clear ``email`` from every other user holding it unverified, now that ``owner`` does.

    Afterwards no two users show the address, so nothing that reads ``users.email`` (the
    account page, the session, an application) can mistake a pre-hijacker for the owner.
    A claim made later still may coexist: the verified flag, not the column, is identity.
    """
    withdrawn = (
        db.session.execute(
            update(User)
            .where(User.email == email, User.email_verified.is_(None), User.id != owner.id)
            .values(email=None)
            .returning(User.id)
        )
        .scalars()
        .all()
    )
    if withdrawn:
        # No address in the log: the ids are enough to follow it up.
        log.info(
            "user %s proved an address; unverified claim withdrawn from users %s",
            owner.id,
            ", ".join(map(str, withdrawn)),
        )
