"""The e-mail domains a sign-in provider is declared for: ``domains`` and ``enforce_domain``
in an OAuth/OIDC or SAML provider's table, read by one parser (docs/how-to/sso-by-domain.md).

An address belongs to a domain when the part after its ``@`` (in the one normal form,
``webapp.mail.email_addresses``) is exactly that domain: ``acme.example`` does not cover
``eu.acme.example``; list each one.
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


@dataclass(frozen=True)
class DomainRule:
    """The domains a provider is declared for, and whether it is their only way in."""

    domains: frozenset[str] = frozenset()
    enforce: bool = False

    def covers(self, address: str) -> bool:
        """Whether normalised ``address`` is in one of the domains."""
        return domain_of(address) in self.domains


def domain_of(address: str) -> str:
    """The domain of a normalised address (what follows its one ``@``)."""
    return address.rpartition("@")[2]


def parse_domain_rule(entry: Mapping[str, Any], where: str) -> DomainRule:
    """Read ``domains`` and ``enforce_domain``; raise ConfigError naming ``where`` and the field."""
    raw = entry.get("domains", [])
    if not isinstance(raw, list) or not all(isinstance(d, str) for d in raw):
        raise ConfigError(f"{where}: domains must be a list of domain names")
    domains = frozenset(d.strip().lower() for d in raw)
    wrong = sorted(d for d in domains if not _DOMAIN.fullmatch(d))
    if wrong:
        raise ConfigError(f"{where}: domains: {', '.join(map(repr, wrong))} is not a domain name")
    enforce = entry.get("enforce_domain", False)
    if not isinstance(enforce, bool):
        raise ConfigError(f"{where}: enforce_domain must be true or false")
    if enforce and not domains:
        raise ConfigError(f"{where}: enforce_domain needs domains (the addresses it applies to)")
    return DomainRule(domains=domains, enforce=enforce)
