"""What a checked SAML response says (``Identity``), how its attributes become a person's
details, and the two ways a sign-in fails at the protocol level."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: The format of a NameID that names none (SAML core 8.3.1).
UNSPECIFIED_FORMAT = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"


class ResponseRefused(Exception):
    """The response did not pass a check (signature, audience, destination, recipient,
    time, InResponseTo, the NameID). The text is for the log: it never quotes the XML."""


class IdpUnavailable(Exception):
    """The IdP's metadata could not be had or used: sign-in cannot start or finish."""


@dataclass(frozen=True)
class Identity:
    """One checked assertion."""

    idp_entity_id: str
    name_id: str
    #: The assertion's ID, accepted once (until ``usable_until``).
    assertion_id: str
    #: After this the assertion is refused by its time alone (its NotOnOrAfter and the skew).
    usable_until: datetime
    #: The request it answers (its InResponseTo): the browser's cookie for it is spent.
    #: None: unsolicited (IdP-initiated, when the provider allows it).
    request_id: str | None
    session_index: str | None
    attributes: Mapping[str, tuple[str, ...]]
    name_id_format: str | None = None

    @property
    def logout_subject(self) -> str:
        """The NameID as a session keeps it for single logout (``name_id_key``)."""
        return name_id_key(self.name_id_format, self.name_id)

    @property
    def subject(self) -> str:
        """The account's identity: the IdP's entity ID (a URI, so without spaces) and the
        NameID, which is unique only at its IdP."""
        return f"{self.idp_entity_id} {self.name_id}"

    def first(self, names: tuple[str, ...]) -> str | None:
        """The first non-empty value among the attributes ``names``, in that order."""
        for name in names:
            for value in self.attributes.get(name, ()):
                if value.strip():
                    return value.strip()
        return None


def name_id_key(name_id_format: str | None, name_id: str) -> str:
    """A NameID as a session keeps it (``provider_sub``): its format, a space, its value.
    Two NameIDs name the same person only with the same format (SAML core 8.3)."""
    return f"{name_id_format or UNSPECIFIED_FORMAT} {name_id}"


@dataclass(frozen=True)
class LogoutOrder:
    """A checked LogoutRequest of the IdP: whose sessions end, and what to answer."""

    request_id: str
    name_id_key: str
    #: The IdP's sessions named (none: every session of the NameID).
    session_indexes: tuple[str, ...]
    #: After this the request is refused by its time alone: its ID is kept until then.
    usable_until: datetime
    relay_state: str | None
    #: pysaml2's parsed request, which the LogoutResponse answers.
    message: Any
