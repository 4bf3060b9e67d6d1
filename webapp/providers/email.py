"""The e-mail provider (magic links and one-time codes): its name and the mailer its messages
go through. Signing in is ``webapp.flows.signin.email``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.i18n import N_
from webapp.mail.delivery import Mailer, mailer_from_settings
from webapp.providers.base import Provider, configured_name, refuse_unknown_fields
from webapp.settings import ConfigError, Settings


class EmailProvider(Provider):
    type = "email"

    def __init__(self, *, id: str, name: str | None, mailer: Mailer) -> None:
        super().__init__(id=id, name=name, default_name=N_("E-mail"))
        self.mailer = mailer


def default_provider(conf: Settings, *, own_mail_transport: bool) -> EmailProvider:
    """The provider EMAIL_SERVER, the application's own mail transport (``own_mail_transport``)
    or a fresh development set-up enables on its own."""
    mailer = mailer_from_settings(conf, own_mail_transport=own_mail_transport)
    return EmailProvider(id="email", name=None, mailer=mailer)


def build(
    entry: Mapping[str, Any], conf: Settings, *, own_mail_transport: bool = False
) -> Provider:
    """A declared e-mail provider. ``own_mail_transport``: the application delivers mail
    itself, so the provider needs no EMAIL_SERVER (``build_providers`` passes it)."""
    refuse_unknown_fields(entry, ())
    try:
        mailer = mailer_from_settings(conf, own_mail_transport=own_mail_transport)
    except ConfigError as exc:
        raise ConfigError(f"provider {entry['id']!r}: {exc}") from None
    return EmailProvider(id=entry["id"], name=configured_name(entry), mailer=mailer)
