"""Signing out: end this browser's session, and with it, where asked, the provider's.

A provider with ``logout = "rp-initiated"`` (OpenID Connect RP-Initiated Logout 1.0) gets
the browser next, with the session's ID token as ``id_token_hint``; it sends the browser
back to ``signout/callback`` with our ``state``, which a sealed cookie ties to this
browser and to where it was going. Our session is deleted first, whatever happens there:
a provider that is down, or a person who never comes back, leaves them signed out here.
A SAML provider whose IdP offers single logout gets the browser next the same way
(``flows.saml_logout``).
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets

from sqlalchemy import select

from webapp.audit import trail
from webapp.browser_state import cookies, sealed_cookies
from webapp.core.hooks import signed_out
from webapp.core.redirects import resolve_redirect
from webapp.flows.provider_tokens import revoke_tokens
from webapp.flows.saml_logout import signs_out_at_idp, start_saml_logout
from webapp.oauth.client import OAuthClient
from webapp.oauth.metadata import ProviderUnavailable
from webapp.providers import oauth_client, providers
from webapp.providers.saml import SamlProvider
from webapp.sessions.store import EndedSession, end_current_session
from webapp.settings import current_settings
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import Account

log = logging.getLogger(__name__)

STATE_COOKIE = "auth.signout-state"
_PURPOSE = "signout-state"


def sign_out(*, callback_url: str | None) -> str:
    """Delete this browser's session (if any), clear its cookie; return where to go next:
    the provider's end-session URL when its logout is on, else the safe redirect.

    A session made through a provider with ``revoke_on_signout`` also revokes (and forgets)
    that account's tokens. ``signed_out`` is sent once the deletion is committed.
    """
    ended = end_current_session()
    destination = resolve_redirect(callback_url)
    if ended is None:
        return destination
    trail.record(
        trail.Event.SIGNOUT,
        user_id=ended.user_id,
        provider=ended.provider,
        detail={"session": ended.id},
    )
    transactions.on_commit(lambda: signed_out.send(user_id=ended.user_id, session_id=ended.id))
    saml = _saml_provider(ended.provider)
    if saml is not None:
        return start_saml_logout(saml, ended, destination)
    client = oauth_client(ended.provider) if ended.provider else None
    if client is None:
        return destination
    if client.config.revoke_on_signout:
        _revoke(client, ended)
    if client.config.logout == "rp-initiated":
        return _provider_logout_url(client, ended, destination) or destination
    return destination


def signs_out_at_provider(provider_id: str | None) -> bool:
    """Whether signing out of a session made through ``provider_id`` also goes there."""
    saml = _saml_provider(provider_id)
    if saml is not None:
        return signs_out_at_idp(saml)
    client = oauth_client(provider_id) if provider_id else None
    return client is not None and client.config.logout == "rp-initiated"


def _saml_provider(provider_id: str | None) -> SamlProvider | None:
    provider = providers().get(provider_id) if provider_id else None
    return provider if isinstance(provider, SamlProvider) else None


def state_cookie_name() -> str:
    """The cookie that holds the state a sign-out at the provider was sent with."""
    return cookies.cookie_name(STATE_COOKIE)


def finish_provider_logout(state: str | None, *, state_cookie: str | None) -> str:
    """Where the browser goes once the provider sent it back: the destination its sign-out
    chose, if ``state`` is the one this browser was sent with (sealed in ``state_cookie``,
    the value of ``state_cookie_name``); else the default page."""
    token = state_cookie
    if token is not None:
        cookies.clear_cookie(state_cookie_name())
    opened = (
        sealed_cookies.open_sealed(token, purpose=_PURPOSE, bound_to=_PURPOSE) if token else None
    )
    kept = json.loads(opened) if opened else {}
    expected = kept.get("state")
    if not (
        isinstance(state, str)
        and isinstance(expected, str)
        and hmac.compare_digest(state.encode(), expected.encode())
    ):
        # Signed out all the same; only where to land is in question.
        log.warning("sign-out callback: state missing, expired or wrong")
        return resolve_redirect(None)
    return str(kept["url"])


def _provider_logout_url(client: OAuthClient, ended: EndedSession, destination: str) -> str | None:
    state = secrets.token_urlsafe(32)
    try:
        url = client.end_session_url(id_token_hint=ended.id_token, state=state)
    except ProviderUnavailable as exc:
        log.warning("%s: no sign-out at the provider: %s", client.id, exc)
        return None
    if url is None:
        log.warning("%s: no sign-out at the provider: no usable end_session_endpoint", client.id)
        return None
    max_age = int(current_settings().oauth_check_max_age.total_seconds())
    kept = json.dumps({"state": state, "url": destination})
    cookies.set_cookie(
        state_cookie_name(),
        sealed_cookies.seal(kept, purpose=_PURPOSE, bound_to=_PURPOSE, max_age=max_age),
        max_age=max_age,
    )
    return url


def _revoke(client: OAuthClient, ended: EndedSession) -> None:
    account = db.session.execute(
        select(Account).where(Account.user_id == ended.user_id, Account.provider == client.id)
    ).scalar_one_or_none()
    if account is not None:
        revoke_tokens(account, forget=True)
