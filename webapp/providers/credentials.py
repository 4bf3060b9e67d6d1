"""The credentials provider: a form's fields, and whether it is the development demo.

The sign-in itself (the hook that checks the fields, throttles, the session) is
``webapp.flows.signin.credentials``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp.i18n import N_, gettext
from webapp.providers.base import Provider, configured_name, refuse_unknown_fields
from webapp.settings import ConfigError, Settings

#: The demo hook's only password. The demo exists in development only (settings refuse it
#: elsewhere) so that a fresh clone can be signed in to with no provider configured.
DEMO_PASSWORD = "demo"


@dataclass(frozen=True)
class Field:
    name: str
    #: As configured; the default fields' labels are in the catalogue.
    label: str
    type: str = "text"

    @property
    def shown_label(self) -> str:
        """The label in the request's language (a configured one is shown as it is)."""
        # Not gettext(""): that is the catalogue's header.
        return gettext(self.label) if self.label else ""


DEFAULT_FIELDS = (
    Field("email", N_("E-mail"), "email"),
    Field("password", N_("Password"), "password"),
)


class CredentialsProvider(Provider):
    type = "credentials"

    def __init__(
        self,
        *,
        id: str,
        name: str | None,
        fields: tuple[Field, ...],
        demo: bool = False,
    ):
        default = N_("Demo account (development only)") if demo else N_("Credentials")
        super().__init__(id=id, name=name, default_name=default)
        self.fields = fields
        self.demo = demo


def demo_provider() -> CredentialsProvider:
    return CredentialsProvider(id="demo", name=None, fields=DEFAULT_FIELDS, demo=True)


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    refuse_unknown_fields(entry, ("fields",))
    raw_fields = entry.get("fields")
    fields: tuple[Field, ...] = DEFAULT_FIELDS
    if raw_fields is not None:
        if not isinstance(raw_fields, list) or not raw_fields:
            raise ConfigError(f"provider {entry['id']!r}: fields must be a non-empty list")
        try:
            fields = tuple(
                Field(str(f["name"]), str(f.get("label", f["name"])), str(f.get("type", "text")))
                for f in raw_fields
            )
        except (TypeError, KeyError):
            raise ConfigError(
                f"provider {entry['id']!r}: each field needs a name (and optional label, type)"
            ) from None
    return CredentialsProvider(id=entry["id"], name=configured_name(entry), fields=fields)
