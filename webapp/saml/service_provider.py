"""Our service provider, on pysaml2 (which checks XML signatures with xmlsec1): our
metadata, the AuthnRequest (HTTP-Redirect binding), the check of the IdP's response
(HTTP-POST binding; an EncryptedAssertion is decrypted with our key), and single logout's
messages (HTTP-Redirect, ``redirect_binding``).

pysaml2 checks the signature (the response's or the assertion's, by a key in the IdP's
metadata: ``want_assertions_or_response_signed``), the status, the issue instant,
NotBefore/NotOnOrAfter with ``CLOCK_SKEW``, an audience restriction when there is one, and
that InResponseTo names one of the requests this browser started (``outstanding``):
unsolicited (IdP-initiated) responses are refused unless the provider allows them
(``allow_idp_initiated``), and a response that names a request must name one of this
browser's even then. On top of it, what the Web Browser SSO
profile requires and pysaml2 leaves optional: a Destination that is our assertion
consumer's URL, exactly one assertion, issued by the configured IdP, an
AudienceRestriction naming us, a bearer SubjectConfirmation whose Recipient is our
assertion consumer and whose NotOnOrAfter is given, and a NameID that is not transient
(it would make a new account at every sign-in).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.md import entities_descriptor_from_string, entity_descriptor_from_string
from saml2.metadata import create_metadata_string
from saml2.saml import NAMEID_FORMAT_PERSISTENT, NAMEID_FORMAT_TRANSIENT, SCM_BEARER, NameID
from saml2.samlp import STATUS_SUCCESS, logout_request_from_string, logout_response_from_string
from saml2.sigver import SigverError, get_xmlsec_binary
from saml2.time_util import str_to_time
from saml2.xmldsig import SIG_RSA_SHA256

from webapp.core.clock import utcnow
from webapp.saml import metadata_signature
from webapp.saml.assertion import (
    Identity,
    IdpUnavailable,
    LogoutOrder,
    ResponseRefused,
    name_id_key,
)
from webapp.saml.config import SamlConfig
from webapp.saml.idp_metadata import MIN_CACHE, MetadataUnavailable, refresh_at
from webapp.saml.keys import KeyPair
from webapp.saml.redirect_binding import read_signed
from webapp.settings import ConfigError

log = logging.getLogger(__name__)
# pysaml2 logs each failed check at ERROR (with xmlsec1's output) before raising it; the
# refusal is logged once, by the flow that gets it, so pysaml2's own lines are held back.
logging.getLogger("saml2").setLevel(logging.CRITICAL)

#: How far the IdP's clock may be from ours, each way.
CLOCK_SKEW = timedelta(seconds=60)
#: The largest SAMLResponse form value read (base64): a signed response is a few kilobytes.
#: Under the app's request body limit (64 KiB), so that a form carrying it gets here.
MAX_RESPONSE_CHARS = 60 * 1024
#: How long after its IssueInstant a logout message is accepted (and the skew).
LOGOUT_MESSAGE_LIFETIME = timedelta(minutes=5)


def xmlsec_binary(provider_id: str) -> str:
    """The xmlsec1 command pysaml2 runs; raise ConfigError when it is not installed."""
    try:
        return str(get_xmlsec_binary())
    except SigverError:
        raise ConfigError(
            f"provider {provider_id!r}: type saml needs the xmlsec1 command (Debian: xmlsec1)"
        ) from None


class ServiceProvider:
    """One saml provider's protocol side. ``idp_metadata`` returns the IdP's metadata
    document (raising MetadataUnavailable); the client built from it is kept."""

    def __init__(
        self,
        config: SamlConfig,
        *,
        auth_url: str,
        keys: KeyPair,
        idp_metadata: Callable[[], str],
    ) -> None:
        self.config = config
        self.entity_id = f"{auth_url}/saml/{config.id}/metadata"
        self.acs_url = f"{auth_url}/callback/{config.id}"
        self.slo_url = f"{auth_url}/saml/{config.id}/slo"
        self.keys = keys
        self._xmlsec = xmlsec_binary(config.id)
        self._idp_metadata = idp_metadata
        self._metadata_signer = (
            metadata_signature.checked_certificate(config.id, config.idp_metadata_cert_file)
            if config.idp_metadata_cert_file is not None
            else None
        )
        self._loaded: _LoadedMetadata | None = None
        self._metadata: str | None = None
        self._lock = threading.Lock()

    def metadata_xml(self) -> str:
        """Our metadata (needs nothing from the IdP), made once."""
        if self._metadata is None:
            text: bytes | str = create_metadata_string(None, config=self._sp_config(None))
            self._metadata = text.decode() if isinstance(text, bytes) else text
        return self._metadata

    def authn_request(self) -> tuple[str, str]:
        """A new AuthnRequest: its ID and the IdP's URL carrying it (HTTP-Redirect)."""
        client, idp = self._client_and_idp()
        try:
            request_id, info = client.prepare_for_authenticate(
                entityid=idp, binding=BINDING_HTTP_REDIRECT
            )
        except Exception as exc:  # pysaml2 raises many kinds for an IdP without SSO
            raise IdpUnavailable(f"cannot make an AuthnRequest: {type(exc).__name__}") from exc
        location = dict(info["headers"])["Location"]
        return str(request_id), str(location)

    def check_response(self, saml_response: str, outstanding: Collection[str]) -> Identity:
        """Check a SAMLResponse form value answering one of the ``outstanding`` request IDs;
        return the identity, or raise ResponseRefused (or IdpUnavailable)."""
        if not saml_response or len(saml_response) > MAX_RESPONSE_CHARS:
            raise ResponseRefused("no SAMLResponse, or one over the size bound")
        # Some IdPs wrap the base64 in lines of 76 characters; nothing else may be in it.
        saml_response = "".join(saml_response.split())
        try:
            base64.b64decode(saml_response, validate=True)
        except (binascii.Error, ValueError):
            raise ResponseRefused("SAMLResponse is not base64") from None
        if not outstanding and not self.config.allow_idp_initiated:
            raise ResponseRefused("no request of this browser is waiting (cookie gone)")
        client, idp = self._client_and_idp()
        try:
            parsed = client.parse_authn_request_response(
                saml_response,
                BINDING_HTTP_POST,
                # pysaml2 maps each to where the browser came from; ours is in the cookie.
                outstanding={request_id: request_id for request_id in outstanding},
            )
        except Exception as exc:  # pysaml2 reports every failed check as an exception
            raise ResponseRefused(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        if parsed is None:
            raise ResponseRefused("pysaml2 found no valid response")
        # With unsolicited responses allowed, pysaml2 takes any InResponseTo: one that is
        # given must still name this browser's request.
        answered = parsed.response.in_response_to
        if answered is not None and answered not in outstanding:
            raise ResponseRefused("InResponseTo names no request of this browser")
        return self._profile_checks(parsed, idp)

    def _profile_checks(self, parsed: Any, idp: str) -> Identity:
        response = parsed.response
        if response.destination != self.acs_url:
            raise ResponseRefused("Destination is not our assertion consumer")
        if len(parsed.assertions) != 1:
            raise ResponseRefused("not exactly one assertion")
        assertion = parsed.assertion
        issuers = [assertion.issuer] + ([response.issuer] if response.issuer else [])
        if any(issuer is None or issuer.text != idp for issuer in issuers):
            raise ResponseRefused("issued by another entity than the configured IdP")
        conditions = assertion.conditions
        audiences = [
            audience.text
            for restriction in (conditions.audience_restriction if conditions else [])
            for audience in restriction.audience
        ]
        if self.entity_id not in audiences:
            raise ResponseRefused("no AudienceRestriction naming us")
        usable_until = self._bearer_until(assertion, response.in_response_to)
        name_id = assertion.subject.name_id if assertion.subject else None
        if name_id is None or not name_id.text or not name_id.text.strip():
            raise ResponseRefused("no NameID")
        if name_id.format == NAMEID_FORMAT_TRANSIENT:
            raise ResponseRefused(
                "the NameID is transient: have the IdP send a persistent one for us"
            )
        statements = assertion.authn_statement
        return Identity(
            idp_entity_id=idp,
            name_id=name_id.text.strip(),
            assertion_id=str(assertion.id),
            usable_until=usable_until,
            request_id=response.in_response_to,
            session_index=statements[0].session_index if statements else None,
            attributes=_attributes(assertion),
            name_id_format=name_id.format,
        )

    def _bearer_until(self, assertion: Any, request_id: str | None) -> datetime:
        """The end of the bearer confirmation for our assertion consumer (and the skew)."""
        for confirmation in assertion.subject.subject_confirmation:
            data = confirmation.subject_confirmation_data
            if (
                confirmation.method == SCM_BEARER
                and data is not None
                and data.recipient == self.acs_url
                and data.in_response_to in (None, request_id)
                and data.not_on_or_after
            ):
                until = datetime.fromtimestamp(_timestamp(data.not_on_or_after), UTC)
                return until + CLOCK_SKEW
        raise ResponseRefused("no bearer SubjectConfirmation for our assertion consumer")

    def offers_logout(self) -> bool:
        """Whether the IdP's metadata has a single logout service (HTTP-Redirect)."""
        try:
            client, idp = self._client_and_idp()
        except IdpUnavailable:
            return False
        return _idp_logout_endpoint(client, idp) is not None

    def logout_request(self, name_id: str, session_index: str | None) -> tuple[str, str] | None:
        """A new LogoutRequest for the NameID (``assertion.name_id_key``) and the IdP's
        session: its ID and the IdP's URL carrying it, signed (HTTP-Redirect); None when
        the IdP offers no single logout. Raise IdpUnavailable."""
        client, idp = self._client_and_idp()
        endpoint = _idp_logout_endpoint(client, idp)
        if endpoint is None:
            return None
        name_id_format, _, value = name_id.partition(" ")
        try:
            request_id, message = client.create_logout_request(
                endpoint,
                idp,
                name_id=NameID(format=name_id_format, text=value),
                session_indexes=[session_index] if session_index else None,
                sign=False,
            )
            info = client.apply_binding(
                BINDING_HTTP_REDIRECT, str(message), endpoint, sign=True, sigalg=SIG_RSA_SHA256
            )
        except Exception as exc:  # pysaml2 and xmlsec1 raise many kinds
            raise IdpUnavailable(f"cannot make a LogoutRequest: {type(exc).__name__}") from exc
        return str(request_id), str(dict(info["headers"])["Location"])

    def check_logout_response(self, raw_query: str, outstanding: Collection[str]) -> str:
        """Check the IdP's LogoutResponse (the raw query of its redirect to our SLO URL)
        answering one of the ``outstanding`` requests; return the request's ID. Raise
        ResponseRefused (or IdpUnavailable)."""
        client, idp = self._client_and_idp()
        message = read_signed(raw_query, _idp_certificates(client, idp))
        response = _parsed(message.kind, "SAMLResponse", message.xml)
        self._check_sender(response, idp)
        if response.in_response_to not in outstanding:
            raise ResponseRefused("InResponseTo names no logout this browser started")
        status = response.status.status_code.value if response.status else None
        if status != STATUS_SUCCESS:
            # We are signed out all the same; the IdP may still have a session.
            log.warning("%s: the IdP's logout ended with status %s", self.config.id, status)
        return str(response.in_response_to)

    def check_logout_request(self, raw_query: str) -> LogoutOrder:
        """Check the IdP's LogoutRequest (the raw query of its redirect to our SLO URL);
        raise ResponseRefused (or IdpUnavailable). Its ID is for the caller to spend."""
        client, idp = self._client_and_idp()
        message = read_signed(raw_query, _idp_certificates(client, idp))
        request = _parsed(message.kind, "SAMLRequest", message.xml)
        issued = self._check_sender(request, idp)
        usable_until = issued + LOGOUT_MESSAGE_LIFETIME
        if request.not_on_or_after:
            usable_until = min(usable_until, _moment(request.not_on_or_after))
        if usable_until + CLOCK_SKEW <= utcnow():
            raise ResponseRefused("the logout request has expired (NotOnOrAfter)")
        name_id = request.name_id
        if name_id is None or not name_id.text or not request.id:
            raise ResponseRefused("no ID, or no NameID (an encrypted one is not read)")
        return LogoutOrder(
            request_id=str(request.id),
            name_id_key=name_id_key(name_id.format, name_id.text.strip()),
            session_indexes=tuple(i.text for i in request.session_index if i.text),
            usable_until=usable_until + CLOCK_SKEW,
            relay_state=message.relay_state,
            message=request,
        )

    def logout_response_url(self, order: LogoutOrder) -> str:
        """The IdP's URL carrying our signed LogoutResponse (success) to ``order``; raise
        IdpUnavailable."""
        client, _ = self._client_and_idp()
        try:
            response = client.create_logout_response(
                order.message, bindings=[BINDING_HTTP_REDIRECT], sign=False
            )
            info = client.apply_binding(
                BINDING_HTTP_REDIRECT,
                str(response),
                response.destination,
                order.relay_state or "",
                response=True,
                sign=True,
                sigalg=SIG_RSA_SHA256,
            )
        except Exception as exc:  # pysaml2 and xmlsec1 raise many kinds
            raise IdpUnavailable(f"cannot make a LogoutResponse: {type(exc).__name__}") from exc
        return str(dict(info["headers"])["Location"])

    def _check_sender(self, message: Any, idp: str) -> datetime:
        """A logout message's issuer, destination and issue instant; return the latter."""
        if message.issuer is None or message.issuer.text != idp:
            raise ResponseRefused("issued by another entity than the configured IdP")
        if message.destination != self.slo_url:
            raise ResponseRefused("Destination is not our single logout URL")
        issued = _moment(message.issue_instant)
        now = utcnow()
        if not now - LOGOUT_MESSAGE_LIFETIME - CLOCK_SKEW <= issued <= now + CLOCK_SKEW:
            raise ResponseRefused("IssueInstant too far from now")
        return issued

    def load_now(self) -> None:
        """Load the IdP's metadata at once (a file's, at start-up); raise IdpUnavailable."""
        self._client_and_idp()

    def _client_and_idp(self) -> tuple[Saml2Client, str]:
        """The client built from the IdP's metadata, and the IdP's entity ID; the metadata
        fetched again when due (``idp_metadata``). Raise IdpUnavailable."""
        with self._lock:
            now = utcnow()
            loaded = self._loaded
            if loaded is None:
                loaded = self._loaded = self._load(now)
            elif now >= loaded.refresh_at:
                try:
                    loaded = self._loaded = self._load(now)
                except IdpUnavailable as exc:
                    log.warning(
                        "%s: IdP metadata not refreshed, the last good copy stays: %s",
                        self.config.id,
                        exc,
                    )
                    loaded = self._loaded = replace(loaded, refresh_at=now + MIN_CACHE)
            if loaded.valid_until is not None and now >= loaded.valid_until:
                raise IdpUnavailable("the IdP metadata's validUntil has passed")
            return loaded.client, loaded.idp

    def _load(self, now: datetime) -> _LoadedMetadata:
        try:
            document = self._idp_metadata()
            if self._metadata_signer is not None:
                metadata_signature.verify(document, self._metadata_signer, self._xmlsec)
        except MetadataUnavailable as exc:
            raise IdpUnavailable(str(exc)) from exc
        try:
            client = Saml2Client(config=self._sp_config(document))
            root = entities_descriptor_from_string(document) or entity_descriptor_from_string(
                document
            )
        except Exception as exc:  # pysaml2's parser raises many kinds
            raise IdpUnavailable(f"IdP metadata unusable: {type(exc).__name__}") from exc
        idp = self._pick_idp(client)
        # pysaml2 refuses a document past its validUntil; the time is kept to stop using it.
        valid_until = _moment(root.valid_until) if root.valid_until else None
        return _LoadedMetadata(
            client, idp, refresh_at(now, root.cache_duration, valid_until), valid_until
        )

    def _pick_idp(self, client: Saml2Client) -> str:
        idps = sorted(client.metadata.identity_providers())
        wanted = self.config.idp_entity_id
        if wanted is not None:
            if wanted not in idps:
                raise IdpUnavailable(f"idp_entity_id {wanted!r} is not in the IdP metadata")
            return wanted
        if not idps:
            raise IdpUnavailable("the metadata names no IdP")
        if len(idps) != 1:
            raise IdpUnavailable(
                f"the metadata names {len(idps)} IdPs: set idp_entity_id to choose one"
            )
        return str(idps[0])

    def _sp_config(self, idp_metadata: str | None) -> SPConfig:
        settings: dict[str, Any] = {
            "entityid": self.entity_id,
            "xmlsec_binary": self._xmlsec,
            "key_file": str(self.keys.key_file),
            "cert_file": str(self.keys.cert_file),
            # The same pair decrypts an EncryptedAssertion (our metadata offers its
            # certificate for encryption too); the signature rules are unchanged.
            "encryption_keypairs": [
                {"key_file": str(self.keys.key_file), "cert_file": str(self.keys.cert_file)}
            ],
            "accepted_time_diff": int(CLOCK_SKEW.total_seconds()),
            # Attributes are read by their Name as sent, never renamed by pysaml2's maps.
            "allow_unknown_attributes": True,
            "service": {
                "sp": {
                    "name": self.config.name,
                    "endpoints": {
                        "assertion_consumer_service": [(self.acs_url, BINDING_HTTP_POST)],
                        "single_logout_service": [(self.slo_url, BINDING_HTTP_REDIRECT)],
                    },
                    "allow_unsolicited": self.config.allow_idp_initiated,
                    "authn_requests_signed": False,
                    "want_response_signed": False,
                    "want_assertions_signed": False,
                    "want_assertions_or_response_signed": True,
                    "name_id_format": NAMEID_FORMAT_PERSISTENT,
                },
            },
        }
        if idp_metadata is not None:
            settings["metadata"] = {"inline": [idp_metadata]}
        config = SPConfig()
        config.load(settings)
        return config


@dataclass(frozen=True)
class _LoadedMetadata:
    """What a usable IdP metadata document gave, and until when it is used."""

    client: Saml2Client
    idp: str
    refresh_at: datetime
    valid_until: datetime | None


def _idp_logout_endpoint(client: Saml2Client, idp: str) -> str | None:
    found = client.metadata.single_logout_service(idp, BINDING_HTTP_REDIRECT, "idpsso")
    return str(found[0]["location"]) if found else None


def _idp_certificates(client: Saml2Client, idp: str) -> list[str]:
    return [cert for _, cert in client.metadata.certs(idp, "idpsso", "signing")]


def _parsed(kind: str, wanted: str, xml: str) -> Any:
    """The LogoutRequest or LogoutResponse in ``xml`` (pysaml2's parser: defusedxml)."""
    if kind != wanted:
        raise ResponseRefused(f"{wanted} expected, {kind} sent")
    parse = logout_request_from_string if wanted == "SAMLRequest" else logout_response_from_string
    try:
        message = parse(xml)
    except Exception as exc:  # the XML parser raises many kinds
        raise ResponseRefused(f"unreadable {wanted}: {type(exc).__name__}") from None
    if message is None:
        raise ResponseRefused(f"{wanted} is not a logout message")
    return message


def _moment(value: str | None) -> datetime:
    if not value:
        raise ResponseRefused("a time is missing")
    return datetime.fromtimestamp(_timestamp(value), UTC)


def _timestamp(value: str) -> float:
    try:
        return float(calendar.timegm(str_to_time(value)))
    except (ValueError, TypeError):
        raise ResponseRefused("unreadable NotOnOrAfter") from None


def _attributes(assertion: Any) -> dict[str, tuple[str, ...]]:
    """The assertion's attributes by Name, their text values (others are left out)."""
    found: dict[str, tuple[str, ...]] = {}
    for statement in assertion.attribute_statement:
        for attribute in statement.attribute:
            values = tuple(v.text for v in attribute.attribute_value if isinstance(v.text, str))
            if attribute.name:
                found[attribute.name] = found.get(attribute.name, ()) + values
    return found
