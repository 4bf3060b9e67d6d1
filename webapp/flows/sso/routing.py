"""Which provider an e-mail address belongs to, by its domain, and the refusals
``enforce_domain`` makes of every other way in.

Only the address's domain decides, never a user lookup: the answer is the same for a known
and an unknown address.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.core.email_domains import specificity
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
    """The provider normalised ``address``'s domain belongs to: the one whose declaration
    covers it most closely (``webapp.core.email_domains``: one at most, as start-up refuses
    an entry two providers declare), or None."""
    found = [
        (specificity(declaration), provider)
        for provider in providers().values()
        if (declaration := provider.domain_rule.match(address)) is not None
    ]
    return max(found, key=lambda pair: pair[0])[1] if found else None


def belongs_to(address: str, provider: Provider) -> bool:
    """Whether normalised ``address``'s domain belongs to ``provider`` (see above): another
    provider declared for it more closely takes it."""
    return provider_for(address) is provider


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
