"""Passkeys (WebAuthn): who we are to an authenticator, where passkeys can be offered, and
what the pages say about them. The protocol's checks, with py_webauthn, are
``passkey_protocol``.

The relying party's id (RP ID) is the site's host, or ``AUTH_PASSKEY_RP_ID`` (a parent
domain, so that passkeys work across that domain's sites); the origin an answer must come
from is the site's origin (``urls.origin``, never a request header). Browsers refuse an
IP address as RP ID, so on such a host passkeys are not offered at all
(``relying_party`` is None, ``unavailable_reason`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from webapp.core import urls
from webapp.core.keyed_hashes import keyed_digest
from webapp.i18n import gettext
from webapp.settings import current_settings, is_ip_address

#: What a passkey is called when the person gives no name and its provider is unknown.
DEFAULT_NAME = "Passkey"
NAME_MAX = 64


class PasskeyRefused(Exception):
    """An authenticator's answer did not pass; the message is for the log only."""


@dataclass(frozen=True)
class RelyingParty:
    """Who we are to authenticators: the RP ID, the origin answers come from, our name."""

    id: str
    origin: str
    name: str


def _origin() -> str:
    # As browsers write it: a default port is left out.
    parts = urlsplit(urls.origin())
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port not in (None, default) else ""
    return f"{parts.scheme}://{host}{port}"


def relying_party() -> RelyingParty | None:
    """Return this site as a relying party; None where browsers refuse passkeys (an IP
    address as host)."""
    conf = current_settings()
    origin = _origin()
    rp_id = conf.passkey_rp_id or urlsplit(origin).hostname or ""
    if not rp_id or is_ip_address(rp_id):
        return None
    return RelyingParty(rp_id, origin, conf.brand.name)


def unavailable_reason() -> str | None:
    """Why passkeys cannot be used at this address (for the pages), or None if they can."""
    if relying_party() is not None:
        return None
    if current_settings().is_development:
        parts = urlsplit(urls.origin())
        local = f"http://localhost{f':{parts.port}' if parts.port else ''}"
        return gettext(
            "Passkeys need a domain name: start with AUTH_URL=%(auth_url)s and open %(site)s",
            auth_url=local + current_settings().base_path,
            site=local,
        )
    return gettext("Passkeys need the site to have a domain name.")


def passkey_texts() -> dict[str, str]:
    """What the passkey ceremonies (ui-src/passkey) may say, in the request's language."""
    return {
        "offline": gettext("We could not reach the server. Check your connection and try again."),
        "generic": gettext(
            "Something went wrong with the passkey. Try again, or choose another way."
        ),
        "signInFirst": gettext("Sign in first, then add a passkey."),
        "notAllowed": gettext(
            "No passkey was used: it was cancelled, timed out, or this device has none for "
            "this site."
        ),
        "registered": gettext("This device already has a passkey for your account."),
        "wrongAddress": gettext("Passkeys do not work at this address."),
        "unsupported": gettext("This browser cannot create passkeys."),
    }


def user_handle(user_id: int) -> bytes:
    """The opaque id an authenticator files a user's passkeys under (16 bytes, keyed, so
    it reveals neither the user id nor how many users there are)."""
    return keyed_digest("passkey-user-handle", str(user_id))[:16]


def counter_went_back(stored: int, new: int) -> bool:
    """Whether a signature counter failed to move forward: a sign of a cloned
    authenticator (WebAuthn §6.1.1). Authenticators that keep no counter send 0 always."""
    return (stored > 0 or new > 0) and new <= stored
