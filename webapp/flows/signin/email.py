"""E-mail sign-in flows: send a link and code, show a link, spend a link or a code (docs/email.md).

Each request creates one ``verification_tokens`` row holding keyed hashes (HMAC-SHA-256 with
a key derived from AUTH_SECRET) of three secrets: the link's 32-byte token, the 8-character
one-time code, and a 32-byte value kept in a cookie of the browser that asked. A copy of
the table therefore cannot be turned into a working link or code, and the code (only 40
bits, so guessable in bulk) is useless outside the browser that asked and dies after a few
wrong tries.

Mail scanners (Safe Links, antivirus gateways) fetch every link in a message; a GET or
HEAD on the link therefore only shows a confirmation page, and only its POST spends the
token, with one ``DELETE … RETURNING`` statement: of any number of concurrent POSTs
exactly one gets the row. The request step never looks the address up, so known and
unknown addresses take the same path and get the same answer; a throttled request gets it
too, without a message being sent.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Row, delete, insert, select, update

from webapp.audit import throttles, trail
from webapp.browser_state import cookies, known_browsers
from webapp.core import urls
from webapp.core.clock import utcnow
from webapp.core.hooks import UserInfo
from webapp.core.keyed_hashes import keyed_hash, keyed_hashes
from webapp.core.redirects import safe_callback_url
from webapp.errors import AuthError
from webapp.flows.signin.finish import finish_signin
from webapp.flows.signin.identity import resolve_user
from webapp.flows.sso import routing
from webapp.i18n import format_moment, ngettext
from webapp.mail.delivery import SIGNIN_MESSAGE, DeliveryError, Mailer
from webapp.mail.email_addresses import InvalidAddress, normalize_email
from webapp.settings import current_settings
from webapp.storage.db import db
from webapp.storage.models import VerificationToken

TOKEN_BYTES = 32
log = logging.getLogger(__name__)

#: No 0/O or 1/I: the code is read off one screen and typed on another.
CODE_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
CODE_LENGTH = 8
#: The cookie that binds a request's one-time code to the browser that asked for it.
BROWSER_COOKIE = "auth.email-browser"
#: Longest token we bother hashing; real ones are 43 characters.
MAX_TOKEN_LENGTH = 128


#: What a message may be for besides signing in: a signed-in person confirming it is them
#: (``/account/confirm``) before deleting the account, or before another change that needs
#: a recent sign-in. The message, its subject and the verify-request page say which.
PURPOSES = frozenset({"delete-account", "confirm"})


def purpose_of(value: str | None) -> str | None:
    """``value`` if it names one of ``PURPOSES``, else None (a plain sign-in)."""
    return value if value in PURPOSES else None


@dataclass(frozen=True)
class CodeRejected:
    """A one-time code that did not match; the request survives for ``tries_left`` more."""

    tries_left: int
    #: The input was not 8 letters and digits at all (a typo, not counted as a try).
    malformed: bool = False


def start_email_signin(
    *,
    provider_id: str,
    email: str,
    callback_url: str | None,
    ip: str | None,
    mailer: Mailer,
    purpose: str | None = None,
    signed_in_as: str | None = None,
) -> str:
    """Send a sign-in link and code to ``email``; return the verify-request URL, or, for an
    address whose domain belongs to a provider (``domains``), the sign-in page offering it.

    ``purpose`` (one of ``PURPOSES``) words the message and the page for a confirmation,
    but only for the address of the browser's own session (``signed_in_as``): nobody can
    send someone else a message that claims their account is being deleted.

    Raises ``EmailSignin`` for an invalid address or a failed delivery, and then leaves no
    token behind (the row is discarded with the request). The row is written before the
    message is sent and committed when the request ends, so a database that is down fails
    the request before any message goes out. Sets the browser-binding cookie only once the
    message is on its way.
    """
    try:
        address = normalize_email(email)
    except InvalidAddress as exc:
        trail.record(trail.Event.EMAIL_REQUESTED, provider=provider_id, error="EmailSignin")
        raise AuthError("EmailSignin", f"invalid address: {exc}") from None
    domain_provider = routing.provider_for(address)
    if domain_provider is not None:
        # Its domain signs in through its provider: the sign-in page offers it (``provider``
        # names it for scripts). No message, no row, no user lookup: the answer is the same
        # for every address of the domain.
        return urls.page_url(
            "signin", provider=domain_provider.id, email=address, callbackUrl=callback_url
        )
    purpose = purpose_of(purpose) if _same_address(signed_in_as, address) else None
    answer = urls.page_url("verify-request", provider=provider_id, type="email", purpose=purpose)
    if _throttled(address, ip, provider_id):
        return answer

    conf = current_settings()
    token = secrets.token_urlsafe(TOKEN_BYTES)
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    browser = secrets.token_urlsafe(TOKEN_BYTES)
    now = utcnow()
    expires = now + conf.email_token_max_age
    target = safe_callback_url(callback_url)
    db.session.execute(
        insert(VerificationToken).values(
            identifier=address,
            token_hash=keyed_hash("email-token", token),
            code_hash=keyed_hash("email-code", code),
            browser_hash=keyed_hash("email-browser", browser),
            expires=expires,
            created_at=now,
            attempts=0,
            callback_url=target,
        )
    )

    link = urls.auth_url(f"callback/{provider_id}", token=token, email=address, callbackUrl=target)
    try:
        mailer.send(
            to=address,
            template=SIGNIN_MESSAGE,
            context=_message_context(
                email=address, url=link, code=code, expires=expires, purpose=purpose
            ),
        )
    except DeliveryError as exc:
        trail.record(
            trail.Event.EMAIL_REQUESTED, subject=address, provider=provider_id, error="EmailSignin"
        )
        raise AuthError("EmailSignin", f"delivery failed: {exc}") from exc
    trail.record(trail.Event.EMAIL_REQUESTED, subject=address, provider=provider_id)
    cookies.set_cookie(browser_cookie_name(), browser, expires=expires, path=_browser_cookie_path())
    return answer


def check_email_link(*, provider_id: str, email: str, token: str) -> str:
    """Return the link's normalised address if it would sign in now; spend nothing.

    For the confirmation page a GET or HEAD on the link shows. Raises ``Verification``.
    """
    address = _link_address(provider_id, email, token)
    found = db.session.execute(
        select(VerificationToken.id).where(
            VerificationToken.identifier == address,
            VerificationToken.token_hash.in_(keyed_hashes("email-token", token)),
            VerificationToken.expires > utcnow(),
        )
    ).first()
    if found is None:
        _refused(provider_id, address)
        raise AuthError("Verification", "link unknown, used or expired (shown, not spent)")
    return address


def complete_email_link(
    *, provider_id: str, email: str, token: str, callback_url: str | None
) -> str:
    """Spend a link and sign its address in; return where to send the browser.

    Raises ``Verification`` when the link is unknown, used, expired or tampered with.
    """
    address = _link_address(provider_id, email, token)
    spent = db.session.execute(
        delete(VerificationToken)
        .where(
            VerificationToken.identifier == address,
            VerificationToken.token_hash.in_(keyed_hashes("email-token", token)),
        )
        .returning(VerificationToken.expires, VerificationToken.callback_url)
    ).first()
    if spent is None:
        _refused(provider_id, address)
        raise AuthError("Verification", "link unknown or already used")
    return _sign_in(provider_id, address, spent, callback_url, by="link")


def complete_email_code(
    *, provider_id: str, code: str, browser: str | None, callback_url: str | None
) -> str | CodeRejected:
    """Spend the one-time code of the request this browser made; return a redirect URL.

    A wrong code returns ``CodeRejected``; the try that reaches the limit deletes the
    request and raises ``Verification``, as does a browser that made no (live) request.
    """
    if not browser or len(browser) > MAX_TOKEN_LENGTH:
        _refused(provider_id)
        raise AuthError("Verification", "code submitted without the requesting browser's cookie")
    conf = current_settings()
    max_attempts = conf.email_code_max_attempts
    cleaned = "".join(code.split()).replace("-", "").upper()
    if len(cleaned) != CODE_LENGTH or not set(cleaned) <= set(CODE_ALPHABET):
        return CodeRejected(tries_left=max_attempts, malformed=True)

    # Count the try before comparing, in one statement: the row lock serialises concurrent
    # tries, so no burst of parallel guesses gets more than max_attempts comparisons.
    row = db.session.execute(
        update(VerificationToken)
        .where(
            VerificationToken.browser_hash.in_(keyed_hashes("email-browser", browser)),
            VerificationToken.expires > utcnow(),
            VerificationToken.attempts < max_attempts,
        )
        .values(attempts=VerificationToken.attempts + 1)
        .returning(
            VerificationToken.id,
            VerificationToken.identifier,
            VerificationToken.code_hash,
            VerificationToken.attempts,
        )
    ).first()
    if row is None:
        _refused(provider_id)
        raise AuthError("Verification", "no live e-mail sign-in request for this browser")

    if any(
        hmac.compare_digest(row.code_hash or "", h) for h in keyed_hashes("email-code", cleaned)
    ):
        spent = db.session.execute(
            delete(VerificationToken)
            .where(VerificationToken.id == row.id)
            .returning(VerificationToken.expires, VerificationToken.callback_url)
        ).one()
        return _sign_in(provider_id, row.identifier, spent, callback_url, by="code")

    tries_left = max_attempts - row.attempts
    if tries_left <= 0:
        db.session.execute(delete(VerificationToken).where(VerificationToken.id == row.id))
        trail.record(
            trail.Event.CODE_LOCKOUT,
            subject=row.identifier,
            provider=provider_id,
            error="Verification",
            detail={"code": "email"},
        )
        # The burn must stand although the request fails.
        raise AuthError("Verification", "one-time code burnt after too many wrong tries", keep=True)
    trail.record(
        trail.Event.CODE_FAILED,
        subject=row.identifier,
        provider=provider_id,
        error=trail.WRONG_CODE,
        detail={"code": "email", "tries_left": tries_left},
    )
    return CodeRejected(tries_left=tries_left)  # a 400 page; the counted try is committed


def browser_cookie_name() -> str:
    """Return the name of the cookie that binds a one-time code to its browser."""
    return cookies.cookie_name(BROWSER_COOKIE)


def _browser_cookie_path() -> str:
    # Only the auth routes need the binding; the rest of the site never sees it.
    return current_settings().base_path or "/"


def _sign_in(
    provider_id: str,
    address: str,
    spent: Row[datetime, str | None],
    callback_url: str | None,
    *,
    by: str,
) -> str:
    """Sign ``address`` in once ``spent`` (expires, callback_url) was deleted in this transaction
    (``by`` its ``link`` or its ``code``).

    The URL stored with the request wins over the one the link carries (both are safe).
    """
    if spent.expires <= utcnow():
        _refused(provider_id, address)
        # The expired row goes (keep): it was presented, it is useless.
        raise AuthError("Verification", "link or code expired", keep=True)
    resolved = resolve_user(
        provider=provider_id,
        provider_type="email",
        subject=address,
        info=UserInfo(email=address, email_verified=True),
        current_user_id=None,
        # Following the link proved control of the address: it may join an existing user.
        allow_email_linking=True,
        create_error="EmailCreateAccount",
    )
    trail.record(
        trail.Event.EMAIL_CONFIRMED,
        user_id=resolved.user.id,
        provider=provider_id,
        detail={"by": by},
    )
    cookies.clear_cookie(browser_cookie_name(), path=_browser_cookie_path())
    known_browsers.remember(throttles.identifier_hash(address))
    return finish_signin(
        resolved.user,
        is_new_user=resolved.is_new_user,
        provider=provider_id,
        amr=("email",),
        callback_url=spent.callback_url or callback_url,
    )


def _link_address(provider_id: str, email: str, token: str) -> str:
    if not token or len(token) > MAX_TOKEN_LENGTH:
        _refused(provider_id)
        raise AuthError("Verification", "link without a usable token")
    try:
        return normalize_email(email)
    except InvalidAddress as exc:
        _refused(provider_id)
        raise AuthError("Verification", f"link with an invalid address: {exc}") from None


def _refused(provider_id: str, address: str | None = None) -> None:
    """Record a link or code that does not sign in (``Verification``), naming the address
    when it is known (a link names one; a code, only its request)."""
    trail.record(
        trail.Event.EMAIL_REFUSED, subject=address, provider=provider_id, error="Verification"
    )


def _throttled(address: str, ip: str | None, provider_id: str) -> bool:
    """Count this request against its limits; say whether one is over (then send nothing;
    the refusal goes to the log, and its key's first in a window to the audit trail).

    Counting before deciding makes the check atomic: of concurrent requests exactly
    ``limit`` pass. A browser that has signed in as the address before has its own
    allowance, so requests from anyone else cannot silence the owner's.
    """
    refusals: list[throttles.Refusal] = []

    def refused(refusal: throttles.Refusal) -> None:
        refusals.append(refusal)
        trail.throttled(refusal, subject=address, provider=provider_id)

    if throttles.admit_signin("email", identifier=address, address=ip, refused=refused):
        return False
    if current_settings().is_development and refusals:
        # Production answers as if the message went (the answer must not tell whether the
        # address is known); a developer testing sign-in would wonder where it went.
        refusal = refusals[0]
        log.warning(
            "development: this e-mail sign-in request was throttled (%d/%ds): no message"
            " was sent, though the page says one was; raise %s to test more often",
            refusal.limit.limit,
            refusal.limit.window.total_seconds(),
            _THROTTLE_SETTINGS.get(refusal.throttle, "the e-mail limits"),
        )
    return True


#: The setting behind each e-mail throttle (throttles._signin_checks's keys).
_THROTTLE_SETTINGS = {
    "email-browser": "EMAIL_ADDRESS_IP_LIMIT",
    "email-id-ip": "EMAIL_ADDRESS_IP_LIMIT",
    "email-ip": "EMAIL_IP_LIMIT",
    "email-id": "EMAIL_ADDRESS_LIMIT",
}


def link_lifetime() -> str:
    """How long a link and its code live, in words ("24 hours"), for the message and pages."""
    hours = round(current_settings().email_token_max_age.total_seconds() / 3600)
    return ngettext("%(num)d hour", "%(num)d hours", hours)


def _same_address(signed_in_as: str | None, address: str) -> bool:
    if not signed_in_as:
        return False
    try:
        return normalize_email(signed_in_as) == address
    except InvalidAddress:
        return False


def _message_context(
    *, email: str, url: str, code: str, expires: datetime, purpose: str | None
) -> dict[str, str]:
    return {
        **link_message_context(email=email, url=url, expires=expires),
        # "signin", or one of PURPOSES: what the message asks the reader to confirm.
        "purpose": purpose or "signin",
        "code": f"{code[:4]}-{code[4:]}",
    }


def link_message_context(*, email: str, url: str, expires: datetime) -> dict[str, str]:
    """What a message carrying a single-use link to ``email`` shows besides its own words:
    the site, the link, and when it expires (the sign-in's, a change of address's)."""
    conf = current_settings()
    return {
        "site": conf.brand.name,
        "host": urls.origin().split("://", 1)[1],
        "color": conf.brand.color,
        "email": email,
        "url": url,
        "expires_in": link_lifetime(),
        "expires_at": format_moment(expires),
    }
