"""The profile on the account page: the display name, and a change of e-mail address.

A name is set, changed or cleared at once. An address changes in two steps, as
django-allauth does it: the person, signed in recently (``recent_signin``), names the new
address, and a single-use link goes to it; only following that link, signed in as the same
person, replaces the address and marks it verified. The old address, if verified, is told
(``notices.address_changed``), and e-mail links to it no longer sign this user in.

The pending change is kept as e-mail sign-in links are (webapp/flows/signin/email.py): a
``verification_tokens`` row with only the link's keyed hash (a purpose of its own, so that
neither kind of link works as the other), the new address and an expiry, and ``user_id``
naming whose address it replaces; one per user, a new request replacing it. Asking names no
owner: whether another account has the address or not, the answer is the same and the
link goes out. Whoever follows it has proved the mailbox, and is told then that the address
is taken; nothing changes. Requests count against the e-mail sign-in's throttles for the
new address (``throttles.admit_signin``: a message to an address is one, whatever it says),
counted before deciding.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.exc import IntegrityError

from webapp.audit import throttles, trail
from webapp.core import urls
from webapp.core.clock import utcnow
from webapp.core.keyed_hashes import keyed_hash, keyed_hashes
from webapp.core.names import clean_name
from webapp.errors import AccountError
from webapp.flows import notices
from webapp.flows.account.recent_signin import require_recent
from webapp.flows.account.ways_in import NOT_FOUND, account_gone, email_provider, locked_user
from webapp.flows.signin.email import MAX_TOKEN_LENGTH, TOKEN_BYTES, link_message_context
from webapp.flows.signin.identity import owner_of, withdraw_unverified_claims
from webapp.i18n import gettext, ngettext
from webapp.mail.delivery import DeliveryError
from webapp.mail.email_addresses import InvalidAddress, normalize_email
from webapp.sessions.store import AuthSession
from webapp.settings import current_settings
from webapp.storage.db import db
from webapp.storage.models import Account, User, VerificationToken
from webapp.telemetry import logsafe

log = logging.getLogger(__name__)

#: Longest display name, in characters (after trimming).
NAME_MAX = 100
#: The page the link opens (webapp/web/account_routes.py): it asks before changing.
CONFIRM_PATH = "/account/email/confirm"
#: The message with the link (webapp/templates/auth/email/email_change.*).
CHANGE_MESSAGE = "email_change"
#: The keyed hash's purpose: a link of a change, never a sign-in's.
_TOKEN_PURPOSE = "email-change-token"

INVALID_NAME = "InvalidName"
INVALID_EMAIL = "InvalidEmail"
NOT_SENT = "EmailNotSent"
LINK_REFUSED = "EmailChangeLink"
IN_USE = "EmailInUse"


@dataclass(frozen=True)
class PendingChange:
    """A change of address waiting for its link to be followed."""

    email: str
    expires: datetime


#: The user's pending change, as columns beside the user's in the account page's read
#: (for its ``user_id`` parameter); ``pending_change`` reads them.
PENDING_COLUMNS = (
    select(VerificationToken.identifier)
    .where(VerificationToken.user_id == bindparam("user_id"))
    .scalar_subquery()
    .label("pending_email"),
    select(VerificationToken.expires)
    .where(VerificationToken.user_id == bindparam("user_id"))
    .scalar_subquery()
    .label("pending_expires"),
)


def pending_change(row: Any) -> PendingChange | None:
    """The change a row with ``PENDING_COLUMNS`` shows, unless none waits or it expired."""
    if row.pending_email is None or row.pending_expires <= utcnow():
        return None
    return PendingChange(row.pending_email, row.pending_expires)


def set_name(*, user_id: int, name: str) -> str | None:
    """Give the user the display name ``name`` (trimmed, NFC); one that is empty once
    trimmed clears it. Return the name now shown (None: none)."""
    chosen = None
    if name.strip():
        chosen = clean_name(name, longest=NAME_MAX)
        if chosen is None:
            raise invalid_name()
    user = db.session.get(User, user_id)
    if user is None:
        raise account_gone()
    user.name = chosen
    return chosen


def invalid_name() -> AccountError:
    """The refusal of a display name that is too long or holds control characters (or of
    a form or body that sends no single name)."""
    return AccountError(
        INVALID_NAME,
        ngettext(
            "A name can have at most %(num)d character, and no control characters.",
            "A name can have at most %(num)d characters, and no control characters.",
            NAME_MAX,
        ),
    )


def request_email_change(
    *, user_id: int, current: AuthSession, email: str, client_address: str | None
) -> PendingChange:
    """Send a link that makes ``email`` the user's address to that address; it replaces
    any change pending. Needs a recent sign-in."""
    require_recent(current)
    try:
        address = normalize_email(email)
    except InvalidAddress:
        raise AccountError(INVALID_EMAIL) from None
    user = _locked(user_id)
    if address == user.email and user.email_verified is not None:
        raise AccountError(INVALID_EMAIL, gettext("That is already your e-mail address."))
    return _send_link(user, address, client_address, again=False)


def resend_email_change(*, user_id: int, client_address: str | None) -> PendingChange:
    """Send the pending change's link again (a new one: the old one stops working). No new
    sign-in: the address was chosen after one."""
    user = _locked(user_id)
    address = _pending_address(user_id)
    if address is None:
        raise _nothing_pending()
    return _send_link(user, address, client_address, again=True)


def cancel_email_change(*, user_id: int) -> str:
    """Withdraw the pending change (its link stops working); return its address."""
    cancelled: str | None = db.session.execute(
        delete(VerificationToken)
        .where(VerificationToken.user_id == user_id, VerificationToken.expires > utcnow())
        .returning(VerificationToken.identifier)
    ).scalar_one_or_none()
    if cancelled is None:
        raise _nothing_pending()
    return cancelled


def check_email_change(*, user_id: int, token: str) -> PendingChange:
    """Return the change a link would make for this user now; spend nothing (for the page a
    GET on the link shows, which mail scanners fetch too)."""
    found = db.session.execute(
        select(VerificationToken.identifier, VerificationToken.expires).where(
            *_link_of(user_id, token), VerificationToken.expires > utcnow()
        )
    ).first()
    if found is None:
        raise _refused(user_id, LINK_REFUSED)
    return PendingChange(found.identifier, found.expires)


def confirm_email_change(*, user_id: int, token: str) -> str:
    """Spend a link of this user's and make its address theirs, verified; return it.

    A link that is unknown, used, replaced, expired, tampered with or another user's is
    refused (``EmailChangeLink``), as is an address another user has (``EmailInUse``);
    then nothing changes.
    """
    user = _locked(user_id)
    spent = db.session.execute(
        delete(VerificationToken)
        .where(*_link_of(user_id, token))
        .returning(VerificationToken.identifier, VerificationToken.expires)
    ).first()
    if spent is None or spent.expires <= utcnow():
        raise _refused(user_id, LINK_REFUSED)
    address: str = spent.identifier
    if _taken(address, user_id):
        raise _refused(user_id, IN_USE)
    notices.address_changed(user)
    # E-mail sign-in follows the address: a link to the old one must not find this user.
    db.session.execute(
        delete(Account).where(
            Account.user_id == user_id,
            Account.type == "email",
            Account.provider_account_id != address,
        )
    )
    user.email = address
    user.email_verified = utcnow()
    try:
        with db.session.begin_nested():
            db.session.flush()  # the verified address's unique index decides a race here
    except IntegrityError:
        raise _refused(user_id, IN_USE) from None
    withdraw_unverified_claims(address, owner=user)
    trail.record(trail.Event.EMAIL_CHANGED, user_id=user_id)
    return address


def _send_link(
    user: User, address: str, client_address: str | None, *, again: bool
) -> PendingChange:
    """Replace the user's pending change by one to ``address`` and mail its link there."""
    provider = email_provider()
    if provider is None:
        raise AccountError(
            NOT_SENT, gettext("This site sends no e-mail, so the address cannot be changed here.")
        )
    counted = throttles.admit_signin(
        "email",
        identifier=address,
        address=client_address,
        refused=partial(trail.throttled, subject=address, provider=provider.id),
        # Counted in the request: the user's row is locked already (on SQLite the one
        # writer's lock is the request's, which a connection of the throttle's own would
        # wait for). Nothing is written before this, so a refusal keeps the count.
        with_request=True,
    )
    if counted is None:
        raise AccountError(
            "RateLimited",
            gettext(
                "Too many messages were asked for just now. Wait a few minutes, then ask again."
            ),
            keep=True,
        )
    token = secrets.token_urlsafe(TOKEN_BYTES)
    now = utcnow()
    expires = now + current_settings().email_token_max_age
    db.session.execute(delete(VerificationToken).where(VerificationToken.user_id == user.id))
    db.session.execute(
        insert(VerificationToken).values(
            identifier=address,
            token_hash=keyed_hash(_TOKEN_PURPOSE, token),
            expires=expires,
            created_at=now,
            attempts=0,
            user_id=user.id,
        )
    )
    link = f"{urls.origin()}{CONFIRM_PATH}?{urlencode({'token': token})}"
    try:
        provider.mailer.send(
            to=address,
            template=CHANGE_MESSAGE,
            context=link_message_context(email=address, url=link, expires=expires),
        )
    except DeliveryError as exc:
        # The reason names the server and its reply, never the address or the link.
        log.warning("change of address: the link was not delivered: %s", logsafe.encode(exc))
        raise AccountError(NOT_SENT) from exc
    trail.record(trail.Event.EMAIL_CHANGE_REQUESTED, user_id=user.id, detail={"again": again})
    return PendingChange(address, expires)


def _locked(user_id: int) -> User:
    """The user's row, locked: one change of theirs at a time sees the one before."""
    user = locked_user(user_id)
    if user is None:
        raise account_gone()
    return user


def _pending_address(user_id: int) -> str | None:
    return db.session.execute(
        select(VerificationToken.identifier).where(
            VerificationToken.user_id == user_id, VerificationToken.expires > utcnow()
        )
    ).scalar_one_or_none()


def _link_of(user_id: int, token: str) -> tuple[Any, ...]:
    """The conditions that find a link's row: its token's, and the user's (another user's
    link finds nothing). A token no link could carry finds nothing either."""
    hashes = keyed_hashes(_TOKEN_PURPOSE, token) if 0 < len(token) <= MAX_TOKEN_LENGTH else []
    return (VerificationToken.token_hash.in_(hashes), VerificationToken.user_id == user_id)


def _taken(address: str, user_id: int) -> bool:
    """Whether ``address`` is another user's: verified as theirs, or their e-mail sign-in's
    (a link to it would sign them in, not this user)."""
    owner = owner_of(address)
    if owner is not None and owner.id != user_id:
        return True
    other = db.session.execute(
        select(Account.id).where(
            Account.type == "email",
            Account.provider_account_id == address,
            Account.user_id != user_id,
        )
    ).first()
    return other is not None


def _nothing_pending() -> AccountError:
    return AccountError(NOT_FOUND, gettext("No change of e-mail address is waiting."))


def _refused(user_id: int, code: str) -> AccountError:
    """Record a link that changed nothing, and return its refusal to raise."""
    trail.record(trail.Event.EMAIL_CHANGED, user_id=user_id, error=code)
    return AccountError(code)
