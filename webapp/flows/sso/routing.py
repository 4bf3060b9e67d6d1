"""Which provider an e-mail address belongs to, by its domain, and the refusals
``enforce_domain`` makes of every other way in.

Only the address's domain decides, never a user lookup: the answer is the same for a known
and an unknown address.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.errors import AuthError
from webapp.mail.email_addresses import address_or_none
from webapp.providers import providers
from webapp.providers.base import Provider


@dataclass(frozen=True)
class SsoChoice:
    """Where an address signs in: its provider, and the hint an OIDC provider is given
    (``login_hint``: the address, so the person need not type it twice)."""

    provider: Provider
    address: str | None = None

    @property
    def login_hint(self) -> str | None:
        return self.address if self.provider.type == "oidc" else None


def provider_for(address: str) -> Provider | None:
    """The provider declared for normalised ``address``'s domain (at most one: start-up
    refuses a domain two providers declare), or None."""
    for provider in providers().values():
        if provider.domain_rule.covers(address):
            return provider
    return None


def sso_choice(email: str | None) -> SsoChoice | None:
    """Where ``email`` (as typed) signs in, if its domain belongs to a provider."""
    address = address_or_none(email)
    provider = provider_for(address) if address else None
    return SsoChoice(provider, address) if provider and address else None


def continue_choices(email: str | None, error: str | None) -> list[SsoChoice]:
    """What the sign-in page offers above its other ways in: "Continue with" the provider
    of ``email``'s domain; after an ``SSORequired`` refusal (which names no address), each
    provider that is the only way in for its domains."""
    choice = sso_choice(email)
    if choice is not None:
        return [choice]
    if error == "SSORequired":
        return [SsoChoice(p) for p in providers().values() if p.domain_rule.enforce]
    return []


def refuse_other_ways_in(provider_id: str, address: str | None) -> None:
    """Raise ``SSORequired`` when normalised ``address`` belongs to a provider with
    ``enforce_domain`` other than ``provider_id`` (the way in being tried)."""
    owner = provider_for(address) if address else None
    if owner is not None and owner.domain_rule.enforce and owner.id != provider_id:
        raise AuthError(
            "SSORequired", f"{provider_id}: the address's domain signs in through {owner.id} only"
        )
