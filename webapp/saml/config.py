"""A SAML provider's table: where the identity provider's metadata is, the e-mail domains
it is declared for, the attribute names it uses, our key pair's files.

```toml
[[providers]]
id = "acme"
type = "saml"
name = "Acme staff"
idp_metadata_url = "https://idp.acme.example/saml2/idp/metadata.php"  # or idp_metadata_file
domains = ["acme.example"]
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webapp.core.email_domains import parse_domain_rule
from webapp.settings import ConfigError, is_loopback_url
from webapp.settings.parsers import nearest

#: The fields of a saml provider's table beside id, type and name.
FIELDS = (
    "idp_metadata_url",
    "idp_metadata_file",
    "idp_entity_id",
    "idp_metadata_cert_file",
    "domains",
    "enforce_domain",
    "attributes",
    "sp_key_file",
    "sp_cert_file",
    "allow_idp_initiated",
)

#: The attribute names each person's details are looked for under, first found wins: the
#: claims ADFS and Entra ID send, Okta's usual names, and Shibboleth's and SimpleSAMLphp's
#: (the urn:oid names, and the same attributes' basic names).
DEFAULT_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "email": (
        "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
        "email",
        "urn:oid:0.9.2342.19200300.100.1.3",
        "mail",
    ),
    "name": (
        "http://schemas.microsoft.com/identity/claims/displayname",
        "displayName",
        "urn:oid:2.16.840.1.113730.3.1.241",
        "name",
        "urn:oid:2.5.4.3",
        "cn",
    ),
}


@dataclass(frozen=True)
class SamlConfig:
    id: str
    name: str
    #: Exactly one of the two.
    idp_metadata_url: str | None
    idp_metadata_file: Path | None
    #: The IdP among the metadata's entities (None: the metadata names exactly one).
    idp_entity_id: str | None
    #: The e-mail domains the IdP vouches for: only their addresses count as verified; the
    #: sign-in page sends them here (docs/how-to/sso-by-domain.md).
    domains: frozenset[str]
    #: The IdP is the only way in for addresses of ``domains``.
    enforce_domain: bool
    #: Where each detail is looked for: "email" and "name" -> attribute names.
    attributes: Mapping[str, tuple[str, ...]]
    #: Our key pair's files (None: made for development; refused elsewhere).
    sp_key_file: Path | None
    sp_cert_file: Path | None
    #: Whether an unsolicited response (IdP-initiated sign-in) is accepted; off by default.
    allow_idp_initiated: bool = False
    #: The certificate whose key must have signed the metadata (None: not checked;
    #: ``metadata_signature``).
    idp_metadata_cert_file: Path | None = None


def parse_config(entry: Mapping[str, Any]) -> SamlConfig:
    """Read a provider table of type saml; raise ConfigError naming what is wrong."""
    where = f"provider {entry['id']!r}"
    base = Path(str(entry.get("_config_dir", ".")))
    url, file = _text(entry, "idp_metadata_url"), _text(entry, "idp_metadata_file")
    if (url is None) == (file is None):
        raise ConfigError(f"{where}: give exactly one of idp_metadata_url and idp_metadata_file")
    if url is not None and not (url.startswith("https://") or is_loopback_url(url)):
        raise ConfigError(f"{where}: idp_metadata_url must be https (http only on loopback)")
    metadata_cert = _text(entry, "idp_metadata_cert_file")
    key, cert = _text(entry, "sp_key_file"), _text(entry, "sp_cert_file")
    if (key is None) != (cert is None):
        raise ConfigError(f"{where}: give both sp_key_file and sp_cert_file, or neither")
    rule = parse_domain_rule(entry, where)
    return SamlConfig(
        id=entry["id"],
        name=_text(entry, "name") or entry["id"],
        idp_metadata_url=url,
        idp_metadata_file=base / file if file is not None else None,
        idp_entity_id=_text(entry, "idp_entity_id"),
        domains=rule.domains,
        enforce_domain=rule.enforce,
        attributes=_attributes(entry, where),
        sp_key_file=base / key if key is not None else None,
        sp_cert_file=base / cert if cert is not None else None,
        allow_idp_initiated=_flag(entry, "allow_idp_initiated", where),
        idp_metadata_cert_file=base / metadata_cert if metadata_cert is not None else None,
    )


def _flag(entry: Mapping[str, Any], field: str, where: str) -> bool:
    value = entry.get(field, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {field} must be true or false")
    return value


def _text(entry: Mapping[str, Any], field: str) -> str | None:
    value = entry.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"provider {entry['id']!r}: {field} must be a non-empty string")
    return value.strip()


def _attributes(entry: Mapping[str, Any], where: str) -> Mapping[str, tuple[str, ...]]:
    raw = entry.get("attributes", {})
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: attributes must be a table (email = [...], name = [...])")
    chosen = dict(DEFAULT_ATTRIBUTES)
    for detail, names in raw.items():
        if detail not in DEFAULT_ATTRIBUTES:
            raise ConfigError(
                f"{where}: attributes: unknown detail {detail!r}" + nearest(detail, chosen)
            )
        if isinstance(names, str):
            names = [names]
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(n, str) and n for n in names)
        ):
            raise ConfigError(f"{where}: attributes.{detail} must name one or more attributes")
        chosen[detail] = tuple(names)
    return chosen
