"""The e-mail domains a sign-in provider is declared for: ``domains`` and ``enforce_domain``
in an OAuth/OIDC or SAML provider's table, read by one parser (docs/how-to/sso-by-domain.md).

An address belongs to a declared domain when the part after its ``@`` (in the one normal
form, ``webapp.mail.email_addresses``) is exactly that domain: ``acme.example`` does not
cover ``eu.acme.example``. A declaration ``*.acme.example`` covers every subdomain of
``acme.example``, at any depth, and not ``acme.example`` itself.

Declarations of several providers may overlap (``*.acme.example`` for the group's IdP,
``eu.acme.example`` for a subsidiary's): the most specific one that covers an address
decides (``specificity``): its own domain before any wildcard, a nearer wildcard before a
farther one. Two providers declaring the very same entry are refused at start-up, so the
owner of an address is always one provider.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp.settings import ConfigError

#: The two fields, beside a kind's own.
FIELDS = ("domains", "enforce_domain")

#: A DNS name, as ``domains`` lists them (lower case, no trailing dot). Linear: no nested
#: quantifier can match the same text two ways (each label ends at a dot).
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
#: What a declaration of every subdomain starts with.
WILDCARD = "*."


@dataclass(frozen=True)
class DomainRule:
    """The domains a provider is declared for, and whether it is their only way in."""

    domains: frozenset[str] = frozenset()
    enforce: bool = False

    def match(self, address: str) -> str | None:
        """The declaration that covers normalised ``address`` most closely: its domain, or
        else the wildcard of its nearest parent domain; None when none does."""
        domain = domain_of(address)
        if domain in self.domains:
            return domain
        labels = domain.split(".")
        for start in range(1, len(labels) - 1):  # parents of two labels or more
            wildcard = WILDCARD + ".".join(labels[start:])
            if wildcard in self.domains:
                return wildcard
        return None


def specificity(declaration: str) -> tuple[bool, int]:
    """How closely ``declaration`` names an address's domain, for ordering: a domain itself
    before any wildcard, then the more labels the closer."""
    return not declaration.startswith(WILDCARD), declaration.count(".")


def domain_of(address: str) -> str:
    """The domain of a normalised address (what follows its one ``@``)."""
    return address.rpartition("@")[2]


def parse_domain_rule(entry: Mapping[str, Any], where: str) -> DomainRule:
    """Read ``domains`` and ``enforce_domain``; raise ConfigError naming ``where`` and the field."""
    raw = entry.get("domains", [])
    if not isinstance(raw, list) or not all(isinstance(d, str) for d in raw):
        raise ConfigError(f"{where}: domains must be a list of domain names")
    domains = frozenset(d.strip().lower() for d in raw)
    wrong = sorted(d for d in domains if not _DOMAIN.fullmatch(d.removeprefix(WILDCARD)))
    if wrong:
        raise ConfigError(
            f"{where}: domains: {', '.join(map(repr, wrong))} is not a domain name"
            " (nor *.<domain name>)"
        )
    enforce = entry.get("enforce_domain", False)
    if not isinstance(enforce, bool):
        raise ConfigError(f"{where}: enforce_domain must be true or false")
    if enforce and not domains:
        raise ConfigError(f"{where}: enforce_domain needs domains (the addresses it applies to)")
    return DomainRule(domains=domains, enforce=enforce)
