"""Sign-in with the device authorization grant (RFC 8628): for a TV, a kiosk, a terminal.

``start_device_signin`` asks the provider for a device code and keeps the request as a row
(``device_requests``): the device code sealed, the browser holding only a random handle
in a sealed cookie, whose SHA-256 names the row. ``check_device_signin`` is the page's
poll. It claims the next poll with one conditional UPDATE on its own connection
(``next_poll_at <= now`` moves past the longest the poll may take, committed at once), so
of any number of tabs, workers and instances polling, one asks the provider at a time and
per interval, and the others answer from the row; no lock is held while the provider
answers. The answer then sets the next poll ``interval`` seconds after it. ``slow_down``
adds 5 seconds to the interval (§3.5). Once approved, the tokens go through the same
checks and account rules as a normal callback (``sign_in_with_token``; this grant has
no nonce, and where the provider gives no ID token, as django-oauth-toolkit does not,
userinfo names the person).

Each start asks the provider in the app's name and keeps a row, so it is bounded before
the provider is asked: per client address (``AUTH_DEVICE_IP_LIMIT``), and in all
(``AUTH_MAX_DEVICE_REQUESTS`` requests in progress). Each new row takes a few expired ones
with it.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import delete, func, select, update

from webapp.audit import throttles, trail
from webapp.browser_state import cookies, sealed_cookies
from webapp.core.clock import utcnow
from webapp.core.redirects import safe_callback_url
from webapp.errors import AuthError
from webapp.flows.signin.oauth import sign_in_with_token
from webapp.oauth.client import OAuthClient
from webapp.oauth.client_auth import GrantRefused, TokenEndpointError
from webapp.oauth.metadata import ProviderUnavailable, url_allowed
from webapp.providers import oauth_client, providers
from webapp.settings import current_settings
from webapp.storage.database import PRUNE_BATCH, autocommit_connection, delete_at_most, write_now
from webapp.storage.db import db
from webapp.storage.models import DeviceRequest
from webapp.telemetry.logsafe import encode

log = logging.getLogger(__name__)

HANDLE_COOKIE = "auth.device"
_PURPOSE = "device-handle"
#: RFC 8628 §3.2: the poll interval when the provider names none.
DEFAULT_INTERVAL = 5
#: §3.5: what ``slow_down`` adds to the interval, for this and every later poll.
SLOW_DOWN_STEP = 5
#: Bounds on what a provider may ask for (docs/constants.md): a device code lives at most
#: this long here, and the page polls at least this often.
MAX_LIFETIME = 1800
MAX_INTERVAL = 60
#: Seconds the browser's handle outlives the code.
HANDLE_GRACE = 300


class DeviceFlowOff(Exception):
    """No such provider, or it does not offer device sign-in."""


class DeviceCodeExpired(Exception):
    """The device code expired (or was used) before it was approved."""


@dataclass(frozen=True)
class DeviceCode:
    """A provider's device authorization response (RFC 8628 §3.2), checked and bounded."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: int
    interval: int


@dataclass(frozen=True)
class DevicePrompt:
    """What the device page shows while the person approves at the provider."""

    provider_id: str
    provider_name: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires: datetime
    interval: int
    #: The provider could not be reached at the last poll (the next one tries again).
    provider_down: bool = False

    def seconds_left(self) -> int:
        return max(0, int((self.expires - utcnow()).total_seconds()))


@dataclass(frozen=True)
class DeviceEnded:
    """No device sign-in in progress: it expired, or this browser never started one."""

    provider_id: str
    provider_name: str
    expired: bool
    #: Where the ended request was to go, for a new code's request.
    callback_url: str | None = None


def device_clients() -> list[OAuthClient]:
    """The providers that offer device sign-in, in configuration order."""
    found = (oauth_client(pid) for pid in providers())
    return [c for c in found if c is not None and c.config.device_flow]


def request_device_code(provider_id: str) -> tuple[OAuthClient, DeviceCode]:
    """Ask the provider for a device code. Raises DeviceFlowOff, or AuthError
    ``OAuthSignin`` when the provider does not answer usably."""
    client = _client(provider_id)
    return client, _device_code(client)


def start_device_signin(
    provider_id: str,
    *,
    callback_url: str | None,
    handle_cookie: str | None,
    client_address: str | None,
) -> DevicePrompt:
    """Ask the provider for a device code; keep the request; queue the handle cookie.

    Raises as ``request_device_code``, and AuthError ``RateLimited`` before the provider is
    asked past a limit (``_admit_start``). A request this browser already had for the
    provider (``handle_cookie``, the value of its ``handle_cookie_name``) is replaced.
    """
    client = _client(provider_id)
    _admit_start(client, client_address)
    code = _device_code(client)
    now = utcnow()
    handle = secrets.token_urlsafe(32)
    previous = _handle(client.id, handle_cookie)
    if previous is not None:
        db.session.execute(delete(DeviceRequest).where(DeviceRequest.handle_hash == previous))
    # Expired rows, once their page can no longer say so (the handle's grace).
    ended = DeviceRequest.expires <= now - timedelta(seconds=HANDLE_GRACE)
    db.session.execute(delete_at_most(DeviceRequest.id, ended, limit=PRUNE_BATCH))
    row = DeviceRequest(
        handle_hash=_hash(handle),
        provider=client.id,
        device_code=code.device_code,
        user_code=code.user_code,
        verification_uri=code.verification_uri,
        verification_uri_complete=code.verification_uri_complete,
        interval=code.interval,
        next_poll_at=now + timedelta(seconds=code.interval),
        expires=now + timedelta(seconds=code.expires_in),
        callback_url=safe_callback_url(callback_url),
        created_at=now,
    )
    db.session.add(row)
    # The handle outlives the code a little, so that the page can still say it expired.
    max_age = code.expires_in + HANDLE_GRACE
    cookies.set_cookie(
        handle_cookie_name(client.id),
        sealed_cookies.seal(handle, purpose=_PURPOSE, bound_to=client.id, max_age=max_age),
        max_age=max_age,
    )
    return _prompt(client, row)


def _admit_start(client: OAuthClient, client_address: str | None) -> None:
    """Count this start against the client address's allowance, then check the requests in
    progress against their cap; raise AuthError ``RateLimited`` past either.

    The cap is checked, not counted: starts in flight together may pass it together, by at
    most their number (the per-address allowance bounds each client's share).
    """
    conf = current_settings()
    allowance = (throttles.client_key("device-ip", client_address), conf.device_ip_limit)
    refused = partial(trail.throttled, provider=client.id)
    if throttles.admit([allowance], refused=refused) is None:
        raise AuthError("RateLimited", f"{client.id}: device sign-ins from this address")
    cap = conf.max_device_requests
    live = select(DeviceRequest.id).where(DeviceRequest.expires > utcnow()).limit(cap)
    if db.session.execute(select(func.count()).select_from(live.subquery())).scalar_one() >= cap:
        raise AuthError("RateLimited", f"{client.id}: {cap} device sign-ins in progress")


def _device_code(client: OAuthClient) -> DeviceCode:
    try:
        return _checked(client, client.request_device_authorization())
    except ProviderUnavailable as exc:
        raise AuthError("OAuthSignin", f"{client.id}: device authorization: {exc}") from exc


def wait_for_approval(
    client: OAuthClient,
    code: DeviceCode,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Poll until the person approves (a terminal's sign-in: one poller, no row); return
    the token response. Raises AuthError ``AccessDenied`` or DeviceCodeExpired."""
    interval, deadline = code.interval, clock() + code.expires_in
    while clock() < deadline:
        sleep(interval)
        try:
            return client.poll_device_code(code.device_code)
        except TokenEndpointError as exc:
            verdict = _verdict(client, exc.error)
        except GrantRefused:
            verdict = "expired"
        except ProviderUnavailable as exc:
            log.warning("%s: device code poll failed: %s", client.id, encode(str(exc)))
            verdict = "pending"
        if verdict == "slow_down":
            interval = min(interval + SLOW_DOWN_STEP, MAX_INTERVAL)
        elif verdict == "denied":
            raise AuthError("AccessDenied", f"{client.id}: the device sign-in was declined")
        elif verdict == "expired":
            break
    raise DeviceCodeExpired(client.id)


def check_device_signin(
    provider_id: str, *, handle_cookie: str | None
) -> DevicePrompt | DeviceEnded | str:
    """Poll for this browser's device sign-in, at most as often as the provider allows.

    ``handle_cookie`` is the value of this browser's ``handle_cookie_name`` cookie. Returns
    the prompt while it is pending, DeviceEnded when there is none (expired, or
    never started), or where to go once signed in. Raises DeviceFlowOff, or AuthError
    ``AccessDenied`` when the person declined.
    """
    client = _client(provider_id)
    handle_hash = _handle(client.id, handle_cookie)
    now = utcnow()
    row, claimed = _load_and_claim(client.id, handle_hash, now) if handle_hash else (None, False)
    if row is None:
        return DeviceEnded(client.id, client.config.name, expired=False)
    if row.expires <= now or row.device_code is None:
        return _end(client, row, expired=True)
    if not claimed:
        return _prompt(client, row)
    try:
        token = client.poll_device_code(row.device_code)
    except TokenEndpointError as exc:
        return _pending_or_end(client, row, exc.error)
    except GrantRefused:
        # The device code is unknown there (used, or forgotten): start again.
        return _end(client, row, expired=True)
    except ProviderUnavailable as exc:
        log.warning("%s: device code poll failed: %s", client.id, encode(str(exc)))
        _next_poll(row, row.interval)
        return _prompt(client, row, provider_down=True)
    # Spent, whatever the sign-in does next, and gone at once for every other poller: a
    # device code polled again after its tokens were issued makes a provider revoke them
    # (oidc-provider does), and a failed sign-in must not leave the row behind.
    write_now(delete(DeviceRequest).where(DeviceRequest.id == row.id))
    cookies.clear_cookie(handle_cookie_name(client.id))
    return sign_in_with_token(
        client, token, nonce=None, form={}, callback_url=row.callback_url, id_token_required=False
    )


def _pending_or_end(client: OAuthClient, row: Any, error: str) -> DevicePrompt | DeviceEnded:
    verdict = _verdict(client, error)
    if verdict == "pending":
        _next_poll(row, row.interval)
        return _prompt(client, row)
    if verdict == "slow_down":
        interval = min(row.interval + SLOW_DOWN_STEP, MAX_INTERVAL)
        _next_poll(row, interval)
        return _prompt(client, row, interval=interval)
    if verdict == "denied":
        _end(client, row, expired=False)
        # keep: the request is over; its row goes even though the sign-in failed.
        raise AuthError("AccessDenied", f"{client.id}: the device sign-in was declined", keep=True)
    return _end(client, row, expired=True)


def _verdict(client: OAuthClient, error: str) -> str:
    """What a token endpoint error means for a device code (RFC 8628 §3.5): pending,
    slow_down, denied or expired (any other error ends the request too)."""
    known = {
        "authorization_pending": "pending",
        "slow_down": "slow_down",
        "access_denied": "denied",
        "expired_token": "expired",
    }
    if error not in known:
        log.warning("%s: device code poll refused: %s", client.id, encode(error))
    return known.get(error, "expired")


def _load_and_claim(provider_id: str, handle_hash: str, now: datetime) -> tuple[Any, bool]:
    """Read this browser's request; take its next poll if due (False: not due, or another
    request has it).

    Both statements on a connection of their own, the claim committed at once: every
    other poller sees it before this one talks to the provider, and no transaction (on
    SQLite: the writer lock) is held while the provider answers.
    """
    with autocommit_connection() as conn:
        row = conn.execute(
            select(DeviceRequest).where(
                DeviceRequest.handle_hash == handle_hash, DeviceRequest.provider == provider_id
            )
        ).first()
        if row is None or row.next_poll_at > now or row.expires <= now:
            return row, False
        # Held until this poll has had every second it may take, so that a slow provider
        # never has two polls of one code in flight; ``_next_poll`` then sets the real time.
        conf = current_settings()
        budget = conf.http_connect_timeout + conf.http_read_timeout
        taken = conn.execute(
            update(DeviceRequest)
            .where(DeviceRequest.id == row.id, DeviceRequest.next_poll_at <= now)
            .values(next_poll_at=now + timedelta(seconds=row.interval + budget))
        ).rowcount
    return row, bool(taken)


def _next_poll(row: Any, interval: int) -> None:
    """Schedule the next poll ``interval`` seconds after this one's answer (committed with
    the request)."""
    db.session.execute(
        update(DeviceRequest)
        .where(DeviceRequest.id == row.id)
        .values(interval=interval, next_poll_at=utcnow() + timedelta(seconds=interval))
    )


def _end(client: OAuthClient, row: Any, *, expired: bool) -> DeviceEnded:
    db.session.execute(delete(DeviceRequest).where(DeviceRequest.id == row.id))
    cookies.clear_cookie(handle_cookie_name(client.id))
    return DeviceEnded(
        client.id, client.config.name, expired=expired, callback_url=row.callback_url
    )


def _prompt(
    client: OAuthClient, row: Any, *, provider_down: bool = False, interval: int | None = None
) -> DevicePrompt:
    return DevicePrompt(
        provider_id=client.id,
        provider_name=client.config.name,
        user_code=row.user_code,
        verification_uri=row.verification_uri,
        verification_uri_complete=row.verification_uri_complete,
        expires=row.expires,
        interval=interval or row.interval,
        provider_down=provider_down,
    )


def _client(provider_id: str) -> OAuthClient:
    client = oauth_client(provider_id)
    if client is None or not client.config.device_flow:
        raise DeviceFlowOff(provider_id)
    return client


def _checked(client: OAuthClient, answer: dict[str, Any]) -> DeviceCode:
    """The device authorization response (RFC 8628 §3.2) with its fields checked and
    bounded; raise ProviderUnavailable when it is not usable."""
    allow_insecure = client.config.allow_insecure

    def text(name: str, limit: int) -> str:
        value = answer.get(name)
        if not isinstance(value, str) or not value or len(value) > limit:
            raise ProviderUnavailable(f"device authorization: unusable {name}")
        return value

    def link(name: str) -> str:
        value = text(name, 2048)
        # Shown as a link and a QR code: only a web address we would talk to ourselves.
        if not url_allowed(value, allow_insecure=allow_insecure):
            raise ProviderUnavailable(f"device authorization: {name} is not an allowed URL")
        return value

    def seconds(name: str, default: int | None, low: int, high: int) -> int:
        value = answer.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ProviderUnavailable(f"device authorization: unusable {name}")
        return max(low, min(value, high))

    if "verification_uri" not in answer and "verification_url" in answer:
        # Google's device endpoint answers with the draft's name.
        answer = {**answer, "verification_uri": answer["verification_url"]}
    return DeviceCode(
        device_code=text("device_code", 4096),
        user_code=text("user_code", 64),
        verification_uri=link("verification_uri"),
        verification_uri_complete=(
            link("verification_uri_complete") if answer.get("verification_uri_complete") else None
        ),
        expires_in=seconds("expires_in", None, 1, MAX_LIFETIME),
        interval=seconds("interval", DEFAULT_INTERVAL, 1, MAX_INTERVAL),
    )


def handle_cookie_name(provider_id: str) -> str:
    """The cookie that holds this browser's handle for a device sign-in at ``provider_id``."""
    return cookies.cookie_name(f"{HANDLE_COOKIE}.{provider_id}")


def _handle(provider_id: str, token: str | None) -> str | None:
    """The hash of the handle ``token`` (the handle cookie's value) seals, if it opens."""
    if not token:
        return None
    handle = sealed_cookies.open_sealed(token, purpose=_PURPOSE, bound_to=provider_id)
    return _hash(handle) if handle else None


def _hash(handle: str) -> str:
    return hashlib.sha256(handle.encode()).hexdigest()
