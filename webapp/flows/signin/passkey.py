"""Passkeys: the options a ceremony starts with, then the browser's answer checked and
acted on (a sign-in, a passkey added to the signed-in user).

A sign-in ends like every other (``finish_signin``): the same hook, second-factor gate,
session and redirect rules. A passkey that verified the person (``uv``) counts as both
factors; any passkey of the user passes a sign-in held for its second factor. Adding a
passkey needs a signed-in browser whose sign-in is recent (``reauth``): no passkey
sign-up for strangers, and a stolen old cookie cannot plant the thief's passkey.

The protocol's checks (``passkey_protocol``, py_webauthn) are imported by the functions
that run a ceremony, at the first one: about 5 MB that most server workers never need.

Every answer first spends its challenge (``passkey_challenges.take``, committed on its
own), so a refused attempt cannot be tried again; a refusal writes nothing else. Options
and answers are each counted per client address first (``AUTH_PASSKEY_IP_LIMIT``), so no
client spends challenges, each a row, without bound.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from flask import url_for
from sqlalchemy import select

from webapp.audit import throttles, trail
from webapp.core import urls
from webapp.core.clock import utcnow
from webapp.core.names import clean_name
from webapp.errors import AccountError, AuthError, CodedError
from webapp.flows import notices
from webapp.flows.signin.finish import finish_signin
from webapp.flows.signin.second_factor import pass_with_passkey
from webapp.i18n import gettext, ngettext
from webapp.passkeys.aaguids import provider_name
from webapp.passkeys.challenges import issue, take
from webapp.passkeys.relying_party import (
    DEFAULT_NAME,
    NAME_MAX,
    PasskeyRefused,
    RelyingParty,
    counter_went_back,
    relying_party,
)
from webapp.providers.passkey import PROVIDER_ID
from webapp.second_factor import pending_signin
from webapp.second_factor.verification import MFA, PASSKEY
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession, current_session
from webapp.settings import current_settings
from webapp.storage.db import db
from webapp.storage.models import Authenticator, User

log = logging.getLogger(__name__)

AUTHENTICATE = "authenticate"
REGISTER = "register"
ACTIONS = (AUTHENTICATE, REGISTER)
#: How a passkey sign-in proved who it is (RFC 8176): a key held in hardware, and with
#: user verification also the person (a PIN or biometric), which makes two factors.
AMR_VERIFIED = (PASSKEY, "user", MFA)
AMR_PRESENT = (PASSKEY,)


class InvalidAction(Exception):
    """Neither ``authenticate`` nor ``register``."""


class PasskeysUnavailable(Exception):
    """Passkeys cannot work at this site's address (an IP address as host)."""


class SessionRequired(Exception):
    """Adding a passkey needs a signed-in browser."""


class RecentSignInRequired(Exception):
    """Adding a passkey needs a recent sign-in; the person confirms first."""


class Throttled(Exception):
    """Too many passkey options from this client address (``AUTH_PASSKEY_IP_LIMIT``)."""


def options(
    action: str, session: AuthSession | None, *, client_address: str | None
) -> dict[str, Any]:
    """Return the options for ``action`` (``authenticate`` or ``register``) and queue the
    challenge's cookie. Raises ``InvalidAction`` for another action, ``PasskeysUnavailable``,
    and for ``register`` ``SessionRequired`` or ``RecentSignInRequired``; ``Throttled``
    past ``client_address``'s allowance."""
    if action not in ACTIONS:
        raise InvalidAction(action)
    rp = relying_party()
    if rp is None:
        raise PasskeysUnavailable()
    if not _admitted("options", client_address):
        raise Throttled()
    from webapp.passkeys import protocol  # at the first ceremony

    if action == AUTHENTICATE:
        return protocol.authentication_options(rp, challenge=issue(AUTHENTICATE))
    if session is None:
        raise SessionRequired()
    if not reauthentication.is_recent(session):
        raise RecentSignInRequired()
    user = db.session.get(User, session.user.id)
    if user is None:
        raise SessionRequired()
    existing = db.session.execute(
        select(Authenticator.credential_id, Authenticator.transports).where(
            Authenticator.user_id == user.id
        )
    ).all()
    label = user.email or user.name or f"user {user.id}"
    return protocol.registration_options(
        rp,
        challenge=issue(_register_binding(user.id)),
        user_id=user.id,
        user_name=label,
        display_name=user.name or label,
        existing=[(row.credential_id, row.transports) for row in existing],
    )


def complete_authentication(
    *, data: str, callback_url: str | None, client_address: str | None
) -> str:
    """Check a sign-in answer and sign its passkey's user in; return where to go.

    Raises ``PasskeySignin`` for anything refused: no or a spent challenge, an answer that
    does not verify, an unknown credential, a counter that went back (logged as a possible
    cloned authenticator).
    """
    rp = _relying_party_or(AuthError("PasskeySignin", "passkeys unavailable at this host"))
    challenge = _take(
        AUTHENTICATE,
        AuthError("RateLimited", "passkey answers from this address"),
        client_address,
    )
    if challenge is None:
        raise AuthError("PasskeySignin", "no challenge: missing, expired or spent")
    from webapp.passkeys import protocol  # at the first ceremony

    try:
        response = protocol.parse_response(data)
    except PasskeyRefused as exc:
        raise AuthError("PasskeySignin", str(exc)) from None
    passkey = db.session.execute(
        select(Authenticator).where(Authenticator.credential_id == response["id"])
    ).scalar_one_or_none()
    user = db.session.get(User, passkey.user_id) if passkey is not None else None
    if passkey is None or user is None:
        raise AuthError("PasskeySignin", "unknown credential, or its user is gone")
    try:
        assertion = protocol.verify_assertion(
            rp, response, challenge=challenge, public_key=passkey.public_key
        )
    except PasskeyRefused as exc:
        raise AuthError("PasskeySignin", f"passkey {passkey.id}: {exc}") from None
    if counter_went_back(passkey.sign_count, assertion.sign_count):
        log.warning(
            "passkey %s of user %s: signature counter %s after %s: possible cloned "
            "authenticator, sign-in refused",
            passkey.id,
            user.id,
            assertion.sign_count,
            passkey.sign_count,
        )
        raise AuthError("PasskeySignin", f"passkey {passkey.id}: counter went back")
    passkey.sign_count = assertion.sign_count
    passkey.backed_up = assertion.backed_up
    passkey.last_used_at = utcnow()
    held = pending_signin.pending()
    if held is not None and held.user_id == user.id:
        # The sign-in waiting for its second factor: this passkey is it.
        return pass_with_passkey(held)
    return finish_signin(
        user,
        is_new_user=False,
        provider=PROVIDER_ID,
        amr=AMR_VERIFIED if assertion.user_verified else AMR_PRESENT,
        callback_url=callback_url,
    )


def complete_registration(*, data: str, name: str, client_address: str | None) -> str:
    """Check a registration answer and add the passkey to the signed-in user; return the
    account page's passkeys section.

    Raises ``SessionRequired`` (an ``AuthError``: the sign-in page) for a signed-out
    browser, and ``AccountError`` for the rest: ``RecentSignInRequired``, ``InvalidName``,
    ``PasskeyNotAdded`` (no or a spent challenge, an answer that does not verify, a
    passkey registered already).
    """
    session = current_session()
    if session is None:
        raise AuthError("SessionRequired", "adding a passkey needs a session")
    if not reauthentication.is_recent(session):
        raise AccountError(
            "RecentSignInRequired",
            ngettext(
                "For your safety, adding a passkey needs a sign-in in the last %(num)d minute. "
                "Confirm it is you, then add it again.",
                "For your safety, adding a passkey needs a sign-in in the last %(num)d minutes. "
                "Confirm it is you, then add it again.",
                reauthentication.window_minutes(),
            ),
        )
    chosen = clean_name(name, longest=NAME_MAX) if name.strip() else ""
    if chosen is None:
        raise AccountError("InvalidName")
    rp = _relying_party_or(
        AccountError("PasskeyNotAdded", gettext("Passkeys cannot be used here."))
    )
    challenge = _take(
        _register_binding(session.user.id), AccountError("RateLimited"), client_address
    )
    if challenge is None:
        raise AccountError(
            "PasskeyNotAdded",
            gettext("The request expired or was already used. Please try again."),
        )
    from webapp.passkeys import protocol  # at the first ceremony

    try:
        new = protocol.verify_registration(rp, protocol.parse_response(data), challenge=challenge)
    except PasskeyRefused as exc:
        log.info("user %s: passkey not added: %s", session.user.id, exc)
        raise AccountError("PasskeyNotAdded") from None
    taken = db.session.execute(
        select(Authenticator.id).where(Authenticator.credential_id == new.credential_id)
    ).first()
    if taken is not None:
        raise AccountError("PasskeyNotAdded", gettext("This passkey is registered already."))
    passkey = Authenticator(
        user_id=session.user.id,
        credential_id=new.credential_id,
        public_key=new.public_key,
        sign_count=new.sign_count,
        transports=new.transports,
        backed_up=new.backed_up,
        device_type=new.device_type,
        aaguid=new.aaguid,
        name=chosen or provider_name(new.aaguid) or DEFAULT_NAME,
        created_at=utcnow(),
    )
    db.session.add(passkey)
    db.session.flush()
    trail.record(
        trail.Event.PASSKEY_ADDED,
        user_id=session.user.id,
        provider=PROVIDER_ID,
        detail={"passkey": passkey.id, "name": passkey.name},
    )
    notices.method_changed(session.user.id, added=True)
    return urls.origin() + url_for("account.overview", _anchor="passkeys")


def _admitted(step: str, client_address: str | None) -> bool:
    """Count this ceremony step (``options`` or ``answer``) against the client address's
    allowance; whether it is within. Before the request's first database use (SQLite: the
    counter's own connection would wait for the request's write lock)."""
    allowance = (
        throttles.client_key(f"passkey-{step}-ip", client_address),
        current_settings().passkey_ip_limit,
    )
    refused = partial(trail.throttled, provider=PROVIDER_ID)
    return throttles.admit([allowance], refused=refused) is not None


def _take(bound_to: str, refused: CodedError, client_address: str | None) -> bytes | None:
    """Spend this browser's challenge (``take``) if ``client_address``'s allowance of
    answers admits it; raise ``refused`` past it, having spent nothing."""
    if not _admitted("answer", client_address):
        raise refused
    return take(bound_to)


def _register_binding(user_id: int) -> str:
    # A registration's challenge is the user's: it cannot be finished by another session.
    return f"{REGISTER}:{user_id}"


def _relying_party_or(error: Exception) -> RelyingParty:
    rp = relying_party()
    if rp is None:
        raise error
    return rp
