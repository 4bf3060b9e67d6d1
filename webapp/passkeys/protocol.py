"""The WebAuthn protocol with py_webauthn: the options the browser passes to an
authenticator, and the checks of its answers.

The checks here are the protocol's (origin, RP ID, challenge, type, signature, user
presence); which credential and user an answer names, the signature counter's history and
what is stored are the flow's (``flows.passkey``). Every refusal is ``PasskeyRefused``,
whatever the answer held (not JSON, a wrong shape, a huge value): never an uncaught error.

Only a passkey ceremony imports this module (``flows.passkey`` does so inside the functions
that need it): py_webauthn, with the certificate and CBOR libraries it brings, is about 5 MB
in each server worker, most of which never see a ceremony.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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

from webapp.core import jsonsafe
from webapp.passkeys.relying_party import PasskeyRefused, RelyingParty, user_handle

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
_NO_AAGUID = "00000000-0000-0000-0000-000000000000"
_TRANSPORTS = {t.value for t in AuthenticatorTransport}


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
