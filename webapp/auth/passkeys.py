"""Passkeys (WebAuthn) with py_webauthn: who we are to an authenticator, the options the
browser passes to it, and the checks of its answers.

The relying party's id (RP ID) is the site's host, or ``AUTH_PASSKEY_RP_ID`` (a parent
domain, so that passkeys work across that domain's sites); the origin an answer must come
from is the site's origin (``urls.origin``, never a request header). Browsers refuse an
IP address as RP ID, so on such a host passkeys are not offered at all
(``relying_party`` is None, ``unavailable_reason`` says why).

The checks here are the protocol's (origin, RP ID, challenge, type, signature, user
presence); which credential and user an answer names, the signature counter's history and
what is stored are the flow's (``flows.passkey``). Every refusal is ``PasskeyRefused``,
whatever the answer held (not JSON, a wrong shape, a huge value): never an uncaught error.
"""

from __future__ import annotations

import hmac
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    options_to_json_dict,
    parse_authentication_credential_json,
    parse_registration_credential_json,
)
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from webapp import jsonsafe
from webapp.auth import urls
from webapp.i18n import gettext
from webapp.settings import current_settings, is_ip_address

#: The longest credential response accepted (characters of JSON). Real ones are a few
#: hundred bytes (attestation "none"); a packed attestation with certificates stays far
#: below this.
MAX_RESPONSE_CHARS = 16 * 1024
#: The longest credential id accepted (base64url characters; the column's size).
MAX_CREDENTIAL_ID_CHARS = 1400
#: How long the browser lets the person choose (a hint; the challenge lives 900 s).
TIMEOUT_MS = 300_000
#: Signature algorithms we accept, most preferred first.
ALGORITHMS = [
    COSEAlgorithmIdentifier.ECDSA_SHA_256,
    COSEAlgorithmIdentifier.EDDSA,
    COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256,
]
#: What a passkey is called when the person gives no name and its provider is unknown.
DEFAULT_NAME = "Passkey"
NAME_MAX = 64
_NO_AAGUID = "00000000-0000-0000-0000-000000000000"
_TRANSPORTS = {t.value for t in AuthenticatorTransport}


class PasskeyRefused(Exception):
    """An authenticator's answer did not pass; the message is for the log only."""


@dataclass(frozen=True)
class RelyingParty:
    """Who we are to authenticators: the RP ID, the origin answers come from, our name."""

    id: str
    origin: str
    name: str


@dataclass(frozen=True)
class NewPasskey:
    """A verified registration: what the authenticators table keeps."""

    credential_id: str
    public_key: str
    sign_count: int
    transports: str | None
    backed_up: bool
    device_type: str
    aaguid: str | None


@dataclass(frozen=True)
class Assertion:
    """A verified sign-in answer (its signature checked, not yet its counter)."""

    sign_count: int
    user_verified: bool
    backed_up: bool


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
    key = current_settings().derive_key("passkey-user-handle")
    return hmac.new(key, str(user_id).encode(), "sha256").digest()[:16]


def clean_name(raw: str) -> str | None:
    """Return a passkey name as the person meant it (trimmed, NFC); None when it is empty,
    longer than 64 characters or holds control characters."""
    name = unicodedata.normalize("NFC", raw.strip())
    if not name or len(name) > NAME_MAX or not name.isprintable():
        return None
    return name


def registration_options(
    rp: RelyingParty,
    *,
    challenge: bytes,
    user_id: int,
    user_name: str,
    display_name: str,
    existing: Sequence[tuple[str, str | None]],
) -> dict[str, Any]:
    """Return the options for ``navigator.credentials.create`` (JSON-ready): a
    discoverable credential (resident key required), user verification preferred,
    attestation "none", none of the user's ``existing`` (credential id, transports) again."""
    options = generate_registration_options(
        rp_id=rp.id,
        rp_name=rp.name,
        user_id=user_handle(user_id),
        user_name=user_name,
        user_display_name=display_name,
        challenge=challenge,
        timeout=TIMEOUT_MS,
        attestation=AttestationConveyancePreference.NONE,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.PREFERRED,
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(
                id=base64url_to_bytes(credential_id),
                transports=[AuthenticatorTransport(t) for t in (transports or "").split()] or None,
            )
            for credential_id, transports in existing
        ],
        supported_pub_key_algs=ALGORITHMS,
    )
    return options_to_json_dict(options)


def authentication_options(rp: RelyingParty, *, challenge: bytes) -> dict[str, Any]:
    """Return the options for ``navigator.credentials.get`` (JSON-ready): any discoverable
    credential of this site (no allow list), user verification preferred."""
    options = generate_authentication_options(
        rp_id=rp.id,
        challenge=challenge,
        timeout=TIMEOUT_MS,
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    return options_to_json_dict(options)


def parse_response(data: str) -> dict[str, Any]:
    """Return the browser's credential response (``data``) as a JSON object with a sane
    credential id; ``PasskeyRefused`` for anything else."""
    if len(data) > MAX_RESPONSE_CHARS:
        raise PasskeyRefused(f"response of {len(data)} characters")
    try:
        response = jsonsafe.loads(data)
    except ValueError:
        raise PasskeyRefused("response is not JSON") from None
    if not isinstance(response, dict):
        raise PasskeyRefused("response is not a JSON object")
    credential_id = response.get("id")
    if (
        not isinstance(credential_id, str)
        or not credential_id
        or len(credential_id) > MAX_CREDENTIAL_ID_CHARS
        or not credential_id.isascii()
        or bytes_to_base64url(base64url_to_bytes(credential_id)) != credential_id
    ):
        raise PasskeyRefused("credential id missing or not base64url")
    return response


def verify_registration(
    rp: RelyingParty, response: dict[str, Any], *, challenge: bytes
) -> NewPasskey:
    """Check a registration answer (origin, RP ID, challenge, type, user presence, the
    attestation's form); return the new passkey. Raises ``PasskeyRefused``."""
    try:
        credential = parse_registration_credential_json(response)
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            supported_pub_key_algs=ALGORITHMS,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError, IndexError) as exc:
        raise PasskeyRefused(f"registration: {exc}") from None
    transports = sorted({t.value for t in credential.response.transports or ()} & _TRANSPORTS)
    return NewPasskey(
        credential_id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
        transports=" ".join(transports) or None,
        backed_up=verified.credential_backed_up,
        device_type=verified.credential_device_type.value,
        aaguid=verified.aaguid if verified.aaguid != _NO_AAGUID else None,
    )


def verify_assertion(
    rp: RelyingParty, response: dict[str, Any], *, challenge: bytes, public_key: str
) -> Assertion:
    """Check a sign-in answer against the stored ``public_key`` (origin, RP ID, challenge,
    type, user presence, signature). The signature counter is left to the caller
    (``counter_went_back``), so that a regression is told apart from a forgery. Raises
    ``PasskeyRefused``."""
    try:
        verified = verify_authentication_response(
            credential=parse_authentication_credential_json(response),
            expected_challenge=challenge,
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            credential_public_key=base64url_to_bytes(public_key),
            # 0: py_webauthn's own counter check off; counter_went_back is ours.
            credential_current_sign_count=0,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError, IndexError) as exc:
        raise PasskeyRefused(f"assertion: {exc}") from None
    return Assertion(
        sign_count=verified.new_sign_count,
        user_verified=verified.user_verified,
        backed_up=verified.credential_backed_up,
    )


def counter_went_back(stored: int, new: int) -> bool:
    """Whether a signature counter failed to move forward: a sign of a cloned
    authenticator (WebAuthn §6.1.1). Authenticators that keep no counter send 0 always."""
    return (stored > 0 or new > 0) and new <= stored
