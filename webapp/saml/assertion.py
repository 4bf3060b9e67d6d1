"""What a checked SAML response says (``Identity``), how its attributes become a person's
details, and the two ways a sign-in fails at the protocol level."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime


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
    request_id: str
    session_index: str | None
    attributes: Mapping[str, tuple[str, ...]]

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
