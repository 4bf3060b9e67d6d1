"""A user's tokens at a provider, for the embedding application: fresh, refreshed once, revoked.

``provider_access_token(user, provider_id)`` is the one call an application makes to act at
a provider for a user; ``GET {AUTH_URL}/token/<provider>`` is the same for scripts. A stored
access token that expires within the refresh margin is refreshed first, under a lock on the
account row, so that of any number of concurrent askers (threads, workers, app instances)
exactly one talks to the provider and the others read its result: ``SELECT … FOR UPDATE``
on PostgreSQL, the writer lock on SQLite (every transaction there begins IMMEDIATE). The
refresh commits on its own connection at once, whatever the request does next: a provider
that rotates refresh tokens has already retired the old one, and a new one lost with a
rolled-back request would end the account's access for good.

Revocation (RFC 7009) happens when an account is unlinked or its user deleted, at sign-out
where a provider asks for it (``revoke_on_signout``), and by hand (``flask auth
revoke-tokens``). It never blocks what it accompanies: a failure is logged and announced
(the ``revocation_failed`` signal, for the application's metrics).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm.attributes import flag_modified

from webapp.audit import trail
from webapp.core.clock import iso_utc, utcnow
from webapp.core.hooks import revocation_failed
from webapp.errors import AccountError
from webapp.flows.signin.identity import account_columns
from webapp.metrics import events as metrics_events
from webapp.oauth.client import OAuthClient
from webapp.oauth.client_auth import GrantRefused
from webapp.oauth.metadata import ProviderUnavailable
from webapp.providers import oauth_client
from webapp.providers.oauth import OAuthProvider
from webapp.settings import current_settings
from webapp.storage.database import autocommit_connection
from webapp.storage.db import db
from webapp.storage.models import Account
from webapp.telemetry import logsafe

log = logging.getLogger(__name__)


class NoProviderAccount(AccountError):
    """The user has no account at that provider (or it is not an OAuth provider here)."""

    def __init__(self, provider_id: str) -> None:
        super().__init__("NotFound", f"No {provider_id} account is linked to this user.")


class RefreshFailed(AccountError):
    """The provider no longer honours the account's grant: the person must sign in again."""

    def __init__(self, provider_id: str) -> None:
        super().__init__(
            "RefreshAccessTokenError",
            f"Access at {provider_id} has ended; sign in with {provider_id} again.",
        )


class ProviderDown(AccountError):
    """The provider did not answer usably; the stored tokens are kept."""

    def __init__(self, provider_id: str) -> None:
        super().__init__("ProviderUnavailable", f"{provider_id} is not answering just now.")


@dataclass(frozen=True)
class ProviderToken:
    """An access token at a provider, as handed to the application."""

    access_token: str
    expires_at: datetime | None
    scope: str | None
    token_type: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "accessToken": self.access_token,
            "expiresAt": iso_utc(self.expires_at) if self.expires_at else None,
            "scope": self.scope,
            "tokenType": self.token_type,
        }


class HasId(Protocol):
    @property
    def id(self) -> int: ...


def provider_access_token(user: HasId | int, provider_id: str) -> str:
    """Return a usable access token of ``user`` at ``provider_id``, refreshed if due.

    Raises ``NoProviderAccount`` (404), ``RefreshFailed`` (409: sign in again) or
    ``ProviderDown`` (503), all ``AccountError``s. On SQLite, call it before the request's
    own database work (see ``provider_token``).
    """
    user_id = user if isinstance(user, int) else user.id
    return provider_token(user_id, provider_id).access_token


def provider_token(user_id: int, provider_id: str) -> ProviderToken:
    """Return the user's token at the provider with its expiry, scope and type."""
    client = oauth_client(provider_id)
    if client is None:
        raise NoProviderAccount(provider_id)
    # The common case reads without a transaction or lock, and writes nothing.
    with autocommit_connection() as conn:
        row = conn.execute(
            select(
                Account.access_token, Account.expires_at, Account.scope, Account.token_type
            ).where(Account.user_id == user_id, Account.provider == provider_id)
        ).first()
    if row is None:
        raise NoProviderAccount(provider_id)
    if not _due(row.access_token, row.expires_at):
        return _handed_out(row, provider_id)
    return _refresh_once(client, user_id, provider_id)


def _due(access_token: str | None, expires_at: datetime | None) -> bool:
    if access_token is None:
        return True
    margin = current_settings().provider_token_refresh_margin
    return expires_at is not None and expires_at - margin <= utcnow()


def _handed_out(account: Any, provider_id: str) -> ProviderToken:
    """The stored token, unless there is none or it has expired (and could not be renewed)."""
    if account.access_token is None or (
        account.expires_at is not None and account.expires_at <= utcnow()
    ):
        raise RefreshFailed(provider_id)
    return ProviderToken(
        account.access_token, account.expires_at, account.scope, account.token_type
    )


def _refresh_once(client: OAuthClient, user_id: int, provider_id: str) -> ProviderToken:
    """Refresh under the account row's lock, unless another asker did while we waited."""
    _check_no_sqlite_transaction()
    refused: GrantRefused | None = None
    with OrmSession(db.engine, expire_on_commit=False) as session, session.begin():
        account = session.execute(
            select(Account)
            .where(Account.user_id == user_id, Account.provider == provider_id)
            .with_for_update()
        ).scalar_one_or_none()
        if account is None:
            raise NoProviderAccount(provider_id)
        if not _due(account.access_token, account.expires_at) or account.refresh_token is None:
            return _handed_out(account, provider_id)
        try:
            answer = client.refresh(account.refresh_token)
        except GrantRefused as exc:
            refused = exc
            _forget_tokens(account)  # dead: committed, so no one tries them again
            record = trail.event_row(
                trail.Event.TOKEN_REFRESHED,
                user_id=user_id,
                provider=provider_id,
                error="RefreshAccessTokenError",
            )
            session.execute(record.insert)
        except ProviderUnavailable as exc:
            log.warning(
                "refreshing %s token of user %s: %s", provider_id, user_id, logsafe.encode(exc)
            )
            metrics_events.token_refresh_unavailable(provider_id)
            raise ProviderDown(provider_id) from exc
        else:
            for name, value in account_columns(answer).items():
                setattr(account, name, value)
            record = trail.event_row(
                trail.Event.TOKEN_REFRESHED, user_id=user_id, provider=provider_id
            )
            session.execute(record.insert)
            log.info("refreshed %s token of user %s", provider_id, user_id)
            token = _handed_out(account, provider_id)
    record.announce()
    if refused is None:
        return token
    log.warning(
        "%s refused to refresh the token of user %s (%s); tokens cleared",
        provider_id,
        user_id,
        logsafe.encode(refused),
    )
    raise RefreshFailed(provider_id)


def _check_no_sqlite_transaction() -> None:
    if (
        db.engine.dialect.name == "sqlite"
        and db.session.registry.has()
        and db.session().in_transaction()
    ):
        # It would wait for this request's own writer lock until the busy timeout.
        raise RuntimeError(
            "provider_access_token refreshes on a connection of its own; on SQLite that "
            "waits for this request's open transaction: call it before the request's own "
            "database work"
        )


def _forget_tokens(account: Account) -> None:
    for name in ("access_token", "refresh_token", "expires_at"):
        setattr(account, name, None)
        # Written even when it read as None: a value no secret opens reads so, and must go.
        flag_modified(account, name)


def revoke_tokens(account: Account, *, forget: bool) -> bool:
    """Revoke the account's refresh token, then its access token, at its provider.

    Both: RFC 7009 §2.1 says revoking a refresh token SHOULD end the grant's access tokens,
    and some providers (Glewlwyd, whose access tokens are JWTs) do not. An access token
    that has expired is left alone, and after a failure nothing more is tried.

    Returns whether the provider confirmed; never raises. A provider without a revocation
    endpoint is no failure (there is nothing to call) but is warned about; anything else
    that goes wrong is logged and sent as ``revocation_failed``. With ``forget`` the tokens
    are cleared from the row (in the caller's transaction) either way.
    """
    confirmed = True
    for token, hint in _revocable(account):
        failure = _revoke(account, token, hint)
        trail.record(
            trail.Event.TOKEN_REVOKED,
            user_id=account.user_id,
            provider=account.provider,
            error=failure,
            detail={"account": account.id, "kind": hint},
        )
        if failure is not None:
            confirmed = False
            break
    if forget:
        _forget_tokens(account)
    return confirmed


def _revocable(account: Account) -> list[tuple[str, str]]:
    """The account's tokens worth revoking, each with its ``token_type_hint``."""
    tokens = []
    if account.refresh_token:
        tokens.append((account.refresh_token, "refresh_token"))
    if account.access_token and (account.expires_at is None or account.expires_at > utcnow()):
        tokens.append((account.access_token, "access_token"))
    return tokens


def _revoke(account: Account, token: str, hint: str) -> str | None:
    """Revoke ``token`` at the account's provider; return None, or the trail's failure code."""
    client = oauth_client(account.provider)
    problem = "the provider is no longer configured"
    if client is not None:
        try:
            if not client.can_revoke():
                log.warning(
                    "%s: no revocation endpoint (configured, in its OpenID discovery or its"
                    " RFC 8414 metadata): the %s of user %s stays valid at the provider until"
                    " it expires",
                    account.provider,
                    hint,
                    account.user_id,
                )
                return trail.REVOCATION_UNSUPPORTED
            client.revoke(token, hint)
            log.info("revoked %s %s of user %s", account.provider, hint, account.user_id)
            return None
        except ProviderUnavailable as exc:
            problem = str(exc)
    log.warning(
        "revoking %s %s of user %s failed: %s",
        account.provider,
        hint,
        account.user_id,
        logsafe.encode(problem),
    )
    revocation_failed.send(
        user_id=account.user_id, provider=account.provider, account_id=account.id, reason=problem
    )
    return trail.REVOCATION_FAILED


def check_revocation_endpoints(app: Flask) -> None:
    """Warn at start-up about each provider that revokes at sign-out (``revoke_on_signout``)
    where no revocation endpoint can be found: configured, in its OpenID discovery, or in
    its RFC 8414 metadata. Revoking would quietly do nothing there.

    An OpenID provider's documents are read in a background thread, by a client of its own,
    so that a provider that is down delays nothing and no lock of the app's clients is
    held if the server forks its workers meanwhile."""
    for provider in app.extensions["webapp.providers"].values():
        if not isinstance(provider, OAuthProvider) or not provider.config.revoke_on_signout:
            continue
        client = OAuthClient(provider.config, provider.client.conf)
        if client.is_oidc and client.config.revocation_endpoint is None:
            threading.Thread(target=_check_revocation_endpoint, args=(client,), daemon=True).start()
        else:
            _check_revocation_endpoint(client)


def _check_revocation_endpoint(client: OAuthClient) -> None:
    try:
        endpoint = client.endpoint("revocation_endpoint")
    except ProviderUnavailable as exc:
        log.warning(
            "%s: revoke_on_signout is on, and whether there is a revocation endpoint could"
            " not be checked: %s",
            client.id,
            logsafe.encode(str(exc)),
        )
        return
    if endpoint is not None:
        log.info("%s: revoke_on_signout: tokens are revoked at %s", client.id, endpoint)
        return
    log.warning(
        "%s: revoke_on_signout is on, but no revocation endpoint is configured, in its OpenID"
        " discovery or in its RFC 8414 metadata: nothing will be revoked there (name"
        " revocation_endpoint in the provider's table)",
        client.id,
    )
