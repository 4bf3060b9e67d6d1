"""Our service provider, on pysaml2 (which checks XML signatures with xmlsec1): our
metadata, the AuthnRequest (HTTP-Redirect binding), and the check of the IdP's response
(HTTP-POST binding).

pysaml2 checks the signature (the response's or the assertion's, by a key in the IdP's
metadata: ``want_assertions_or_response_signed``), the status, the issue instant,
NotBefore/NotOnOrAfter with ``CLOCK_SKEW``, an audience restriction when there is one, and
that InResponseTo names one of the requests this browser started (``outstanding``):
unsolicited (IdP-initiated) responses are refused. On top of it, what the Web Browser SSO
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
from datetime import UTC, datetime, timedelta
from typing import Any

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.metadata import create_metadata_string
from saml2.saml import NAMEID_FORMAT_PERSISTENT, NAMEID_FORMAT_TRANSIENT, SCM_BEARER
from saml2.sigver import SigverError, get_xmlsec_binary
from saml2.time_util import str_to_time

from webapp.saml.assertion import Identity, IdpUnavailable, ResponseRefused
from webapp.saml.config import SamlConfig
from webapp.saml.idp_metadata import MetadataUnavailable
from webapp.saml.keys import KeyPair
from webapp.settings import ConfigError

log = logging.getLogger(__name__)

#: How far the IdP's clock may be from ours, each way.
CLOCK_SKEW = timedelta(seconds=60)
#: The largest SAMLResponse form value read (base64): a signed response is a few kilobytes.
MAX_RESPONSE_CHARS = 256 * 1024


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
        self.keys = keys
        self._xmlsec = xmlsec_binary(config.id)
        self._idp_metadata = idp_metadata
        self._client: Saml2Client | None = None
        self._metadata: str | None = None
        self._idp_entity_id: str | None = None
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
        try:
            base64.b64decode(saml_response, validate=True)
        except (binascii.Error, ValueError):
            raise ResponseRefused("SAMLResponse is not base64") from None
        if not outstanding:
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
            request_id=str(response.in_response_to),
            session_index=statements[0].session_index if statements else None,
            attributes=_attributes(assertion),
        )

    def _bearer_until(self, assertion: Any, request_id: str) -> datetime:
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

    def _client_and_idp(self) -> tuple[Saml2Client, str]:
        with self._lock:
            if self._client is None or self._idp_entity_id is None:
                try:
                    document = self._idp_metadata()
                except MetadataUnavailable as exc:
                    raise IdpUnavailable(str(exc)) from exc
                try:
                    client = Saml2Client(config=self._sp_config(document))
                except Exception as exc:  # pysaml2's parser raises many kinds
                    raise IdpUnavailable(f"IdP metadata unusable: {type(exc).__name__}") from exc
                self._idp_entity_id = self._pick_idp(client)
                self._client = client
            return self._client, self._idp_entity_id

    def _pick_idp(self, client: Saml2Client) -> str:
        idps = sorted(client.metadata.identity_providers())
        wanted = self.config.idp_entity_id
        if wanted is not None:
            if wanted not in idps:
                raise IdpUnavailable(f"idp_entity_id {wanted!r} is not in the IdP metadata")
            return wanted
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
            "accepted_time_diff": int(CLOCK_SKEW.total_seconds()),
            # Attributes are read by their Name as sent, never renamed by pysaml2's maps.
            "allow_unknown_attributes": True,
            "service": {
                "sp": {
                    "name": self.config.name,
                    "endpoints": {
                        "assertion_consumer_service": [(self.acs_url, BINDING_HTTP_POST)],
                    },
                    "allow_unsolicited": False,
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
