"""SAML single logout at ``{AUTH_URL}/saml/<id>/slo`` (HTTP-Redirect binding), both ways.

Ours: signing out of a session made through a SAML provider whose IdP offers single
logout sends the browser on to the IdP with a signed LogoutRequest naming the session's
NameID and SessionIndex (``sessions.provider_sub``/``provider_sid``), its ID kept in this
browser (``saml_requests``) with where the sign-out goes next. Our session is deleted
first, whatever happens there. The IdP's LogoutResponse must be signed by its key, answer
that request, and name the IdP and our URL, before the browser goes on.

The IdP's: its signed LogoutRequest ends every session of that NameID (of that
SessionIndex, when it names one) on every instance, its ID spent once (with the
assertions, ``spent_saml_assertions``), and is answered with our signed LogoutResponse.
A refusal (``LogoutRefused``) writes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter

from webapp.audit import trail
from webapp.browser_state import saml_requests
from webapp.core.hooks import provider_signed_out
from webapp.core.redirects import resolve_redirect
from webapp.flows.signin.saml import spend_once
from webapp.providers.saml import SamlProvider
from webapp.saml.assertion import IdpUnavailable, ResponseRefused
from webapp.sessions.store import EndedSession, end_provider_sessions
from webapp.storage import transactions

log = logging.getLogger(__name__)


class LogoutRefused(Exception):
    """A logout message at /slo did not pass a check; the text is for the log."""


def signs_out_at_idp(provider: SamlProvider) -> bool:
    """Whether signing out of a session made through ``provider`` also goes to the IdP."""
    return provider.service_provider.offers_logout()


def start_saml_logout(provider: SamlProvider, ended: EndedSession, destination: str) -> str:
    """Where the browser goes after our sign-out of ``ended``: the IdP with a LogoutRequest
    (its ID kept in this browser, with ``destination``), or ``destination`` when the IdP
    offers no single logout, is unavailable, or the session named no NameID."""
    if ended.provider_sub is None:
        return destination
    try:
        made = provider.service_provider.logout_request(ended.provider_sub, ended.provider_sid)
    except IdpUnavailable as exc:
        log.warning("%s: no sign-out at the provider: %s", provider.id, exc)
        return destination
    if made is None:
        return destination
    request_id, url = made
    saml_requests.store(provider.id, request_id, destination, logout=True)
    return url


def single_logout(provider: SamlProvider, raw_query: str, *, is_response: bool) -> str:
    """Handle a message the IdP sent the browser to /slo with (``raw_query``, as received):
    its LogoutResponse to our request, or its own LogoutRequest. Return where the browser
    goes next; raise LogoutRefused."""
    if is_response:
        return _finish_our_logout(provider, raw_query)
    return _idp_logout(provider, raw_query)


def _finish_our_logout(provider: SamlProvider, raw_query: str) -> str:
    pending = saml_requests.pending(provider.id, logout=True)
    try:
        request_id = provider.service_provider.check_logout_response(raw_query, pending)
    except (ResponseRefused, IdpUnavailable) as exc:
        raise LogoutRefused(f"{provider.id}: LogoutResponse: {exc}") from exc
    saml_requests.spend(provider.id, request_id, logout=True)
    return pending[request_id] or resolve_redirect(None)


def _idp_logout(provider: SamlProvider, raw_query: str) -> str:
    service_provider = provider.service_provider
    try:
        order = service_provider.check_logout_request(raw_query)
    except (ResponseRefused, IdpUnavailable) as exc:
        raise LogoutRefused(f"{provider.id}: LogoutRequest: {exc}") from exc
    if not spend_once(provider.id, f"LogoutRequest {order.request_id}", order.usable_until):
        raise LogoutRefused(f"{provider.id}: LogoutRequest: its ID was used before")
    ended = [
        session
        for index in order.session_indexes or (None,)
        for session in end_provider_sessions(provider.id, sid=index, sub=order.name_id_key)
    ]
    for user_id, count in Counter(e.user_id for e in ended).items():
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            provider=provider.id,
            detail={"reason": trail.BACKCHANNEL, "sessions": count},
        )
    log.info("%s: the IdP's logout request ended %d session(s)", provider.id, len(ended))
    transactions.on_commit(
        lambda: provider_signed_out.send(
            provider=provider.id,
            session_ids=[e.id for e in ended],
            user_ids=sorted({e.user_id for e in ended}),
        )
    )
    try:
        return service_provider.logout_response_url(order)
    except IdpUnavailable as exc:
        # Unanswered, the IdP would think the logout failed: nothing is ended either.
        raise LogoutRefused(f"{provider.id}: LogoutRequest: {exc}") from exc
