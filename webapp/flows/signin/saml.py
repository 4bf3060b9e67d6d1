"""SAML 2.0 sign-in: send the browser to the IdP with an AuthnRequest, check the response it
comes back with (or, with ``allow_idp_initiated``, an unsolicited one, which lands on the
default page).

The request's ID is kept in this browser (``saml_requests``, a sealed cookie); the
response must answer one of this browser's requests (InResponseTo) and pass every check of
``webapp.saml.service_provider`` before anything is written; its assertion is then spent,
in the database (``spent_saml_assertions``), so a second use is refused on every instance.
Any failure is an ``AuthError``: ``OAuthSignin`` before the browser leaves,
``OAuthCallback`` after, ``OAuthCreateAccount``/``OAuthAccountNotLinked`` from the linking
rules; nothing is stored then. The identity is the IdP's entity ID and the NameID; an
address counts as verified only in the domains the provider is declared for. The session
keeps the NameID (with its format) and the SessionIndex for single logout
(``webapp.flows.saml_logout``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from webapp.browser_state import saml_requests
from webapp.core.hooks import UserInfo
from webapp.core.redirects import is_safe_callback_url
from webapp.errors import AuthError
from webapp.flows import linking
from webapp.flows.signin.finish import finish_signin
from webapp.flows.signin.identity import resolve_user
from webapp.flows.sso import routing
from webapp.mail.email_addresses import address_or_none
from webapp.providers.saml import SamlProvider
from webapp.saml.assertion import Identity, IdpUnavailable, ResponseRefused
from webapp.sessions.store import ProviderSession, current_session
from webapp.storage.db import db
from webapp.storage.models import SpentSamlAssertion

log = logging.getLogger(__name__)

#: The longest identity an ``accounts`` row holds (entity ID, a space, the NameID); and
#: the longest NameID (with its format) and SessionIndex a session keeps for single logout.
MAX_SUBJECT = 255


def start_saml_signin(provider: SamlProvider, *, callback_url: str | None) -> str:
    """Return the IdP's URL carrying a new AuthnRequest; queue its cookie. With a session
    present the sign-in is a link (``webapp.flows.linking``), as for OAuth."""
    confirm = linking.confirmation_before_leaving(current_session(), provider.id)
    if confirm is not None:
        return confirm
    try:
        request_id, url = provider.service_provider.authn_request()
    except IdpUnavailable as exc:
        raise AuthError("OAuthSignin", f"{provider.id}: {exc}") from exc
    # Only a URL that would be followed is kept (an unsafe one is replaced anyway).
    saml_requests.store(
        provider.id, request_id, callback_url if is_safe_callback_url(callback_url) else None
    )
    return url


def complete_saml_callback(provider: SamlProvider, *, saml_response: str) -> str:
    """Check the IdP's response, spend its assertion, sign the person in; return where the
    browser goes."""
    pending = saml_requests.pending(provider.id)
    try:
        identity = provider.service_provider.check_response(saml_response, pending)
    except (ResponseRefused, IdpUnavailable) as exc:
        raise AuthError("OAuthCallback", f"{provider.id}: SAML response: {exc}") from exc
    if identity.request_id is not None:
        saml_requests.spend(provider.id, identity.request_id)
    _spend_assertion(provider.id, identity)
    subject = identity.subject
    if len(subject) > MAX_SUBJECT:
        raise AuthError("OAuthCallback", f"{provider.id}: entity ID and NameID are too long")
    session = current_session()
    confirm = linking.confirmation_on_return(session, provider.id, subject)
    if confirm is not None:
        return confirm
    resolved = resolve_user(
        provider=provider.id,
        provider_type=provider.type,
        subject=subject,
        info=_user_info(provider, identity),
        current_user_id=session.user.id if session else None,
        allow_email_linking=False,
        create_error="OAuthCreateAccount",
    )
    return finish_signin(
        resolved.user,
        is_new_user=resolved.is_new_user,
        provider=provider.id,
        amr=("fed",),
        # Unsolicited: the default page (the IdP's RelayState is not a URL we trust).
        callback_url=pending[identity.request_id] if identity.request_id else None,
        profile={
            "name_id": identity.name_id,
            "idp": identity.idp_entity_id,
            "attributes": {name: list(values) for name, values in identity.attributes.items()},
        },
        provider_session=_provider_session(provider, identity),
    )


def _provider_session(provider: SamlProvider, identity: Identity) -> ProviderSession | None:
    """The NameID (with its format) and SessionIndex single logout names the session by;
    None (no single logout for it) when either is longer than a session row keeps."""
    subject, index = identity.logout_subject, identity.session_index
    if len(subject) > MAX_SUBJECT or (index is not None and len(index) > MAX_SUBJECT):
        log.warning("%s: NameID or SessionIndex too long for single logout", provider.id)
        return None
    return ProviderSession(sid=index, sub=subject, id_token=None)


def _spend_assertion(provider_id: str, identity: Identity) -> None:
    """Record the assertion as used; raise AuthError if it was used before (anywhere)."""
    if not spend_once(provider_id, identity.assertion_id, identity.usable_until):
        raise AuthError("OAuthCallback", f"{provider_id}: assertion used before")


def spend_once(provider_id: str, message_id: str, expires: datetime) -> bool:
    """Record a SAML message's ID (an assertion's, a LogoutRequest's: the IdP makes them
    unique) as used, on every instance, until ``expires``; False if it was used before."""
    digest = hashlib.sha256(message_id.encode()).hexdigest()
    try:
        with db.session.begin_nested():
            db.session.execute(
                insert(SpentSamlAssertion).values(
                    provider=provider_id, assertion_hash=digest, expires=expires
                )
            )
    except IntegrityError:
        return False
    return True


def _user_info(provider: SamlProvider, identity: Identity) -> UserInfo:
    """The person's details from the attributes; the address is verified only when its
    domain belongs to this provider (``routing.belongs_to``: declared, and no other
    provider declared for it more closely)."""
    names: Mapping[str, tuple[str, ...]] = provider.config.attributes
    email = address_or_none(identity.first(names["email"]))
    name = identity.first(names["name"])
    return UserInfo(
        email=email,
        name=name[:255] if name else None,
        image=None,
        subject=identity.subject,
        email_verified=email is not None and routing.belongs_to(email, provider),
    )
