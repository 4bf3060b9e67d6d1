"""What every sign-in provider is: an id, a name, a kind, and its entry in ``GET providers``.

A provider is configuration only; signing in through one is the adapter of its kind in
``webapp.web.signin``, which calls the use case in ``webapp.flows.signin``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webapp.core import urls
from webapp.core.email_domains import DomainRule
from webapp.i18n import gettext
from webapp.settings import ConfigError
from webapp.settings.parsers import nearest

#: A provider declared for no e-mail domain.
NO_DOMAINS = DomainRule()

#: The fields every provider table has.
COMMON_FIELDS = frozenset({"id", "type", "name"})


def refuse_unknown_fields(entry: Mapping[str, Any], fields: Iterable[str]) -> None:
    """Refuse a field of a provider's table that its kind does not take, naming the
    nearest one it does (keys starting with ``_`` are the settings loader's own)."""
    allowed = COMMON_FIELDS | set(fields)
    for key in entry:
        if key not in allowed and not key.startswith("_"):
            raise ConfigError(
                f"provider {entry['id']!r}: unknown field {key!r}" + nearest(key, allowed)
            )


def configured_name(entry: Mapping[str, Any]) -> str | None:
    """The ``name`` of a provider's table, or None when it gives none."""
    name = entry.get("name")
    return None if name is None else str(name)


class Provider:
    """A way to sign in, as configured."""

    #: oidc, oauth, email, credentials or webauthn, as shown in ``GET providers``.
    type: str = ""
    #: Whether a POST to the callback must carry a CSRF token (not for form_post returns
    #: from an identity provider, which are cross-site by design and checked by state).
    callback_needs_csrf: bool = True

    def __init__(
        self,
        *,
        id: str,
        name: str | None,
        default_name: str = "",
        domain_rule: DomainRule = NO_DOMAINS,
    ) -> None:
        self.id = id
        #: The e-mail domains the sign-in page sends to this provider, and whether it is
        #: their only way in (``domains``, ``enforce_domain``: OAuth/OIDC and SAML).
        self.domain_rule = domain_rule
        #: The ``name`` its table gives (shown as written), or None for ``default_name``.
        self.configured_name = name
        #: The name the application gives it when its table names none: English, marked
        #: for the catalogue (``N_``), and translated where it is shown.
        self.default_name = default_name

    @property
    def name(self) -> str:
        """The name people read: the configured one, else the default name in the language
        of the request that shows it (a provider is built once, at start-up, for them all)."""
        if self.configured_name is None:
            return gettext(self.default_name)
        return self.configured_name

    def public_json(self) -> dict[str, str]:
        """Return this provider's entry in ``GET providers``: the name in English, the same
        for every request (Auth.js clients read it; the pages take ``name``)."""
        return {
            "id": self.id,
            "name": self.default_name if self.configured_name is None else self.configured_name,
            "type": self.type,
            "signinUrl": urls.auth_url(f"signin/{self.id}"),
            "callbackUrl": urls.auth_url(f"callback/{self.id}"),
        }


def refuse_shared_domains(built: Mapping[str, Provider]) -> None:
    """Refuse a domain that two providers declare: an address must lead to one of them."""
    claimed: dict[str, str] = {}
    for provider in built.values():
        for domain in sorted(provider.domain_rule.domains):
            other = claimed.setdefault(domain, provider.id)
            if other != provider.id:
                raise ConfigError(
                    f"provider {provider.id!r}: domains: {domain!r} is already declared by"
                    f" provider {other!r}"
                )
