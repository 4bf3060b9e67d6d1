"""The credentials provider: a form's fields, the hook that checks them, the demo hook.

The sign-in itself (throttles, the hook's verdict, the session) is
``webapp.auth.flows.credentials``.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import request

from webapp.auth.addresses import InvalidAddress, normalize_email
from webapp.auth.errors import AuthError
from webapp.auth.flows.credentials import complete_credentials_signin
from webapp.auth.hooks import UserInfo, current_hooks
from webapp.auth.providers.base import Outcome, Provider, Redirect
from webapp.i18n import N_, gettext
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

    def __init__(self, *, id: str, name: str, fields: tuple[Field, ...], demo: bool = False):
        super().__init__(id=id, name=name)
        self.fields = fields
        self.demo = demo

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        # Auth.js posts credentials to the callback; POST signin/<id> is accepted the same way.
        return self.callback(method="POST", args=query, form=form, callback_url=callback_url)

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        if method != "POST":
            raise AuthError("CredentialsSignin", "credentials callback needs POST")
        submitted = {f.name: str(form.get(f.name, ""))[:1024] for f in self.fields}
        return Redirect(
            complete_credentials_signin(
                provider_id=self.id,
                submitted=submitted,
                identifier=submitted[self.fields[0].name],
                authorize=self._authorize,
                client_address=request.remote_addr,
                callback_url=callback_url,
            )
        )

    def _authorize(self, submitted: Mapping[str, str]) -> UserInfo | None:
        if self.demo:
            return _demo_authorize(submitted)
        hook = current_hooks().authorize
        if hook is None:
            raise AuthError("Configuration", f"credentials provider {self.id!r} has no hook")
        return hook(submitted)


def _demo_authorize(form: Mapping[str, str]) -> UserInfo | None:
    """Accept any well-formed address with DEMO_PASSWORD (development only)."""
    try:
        email = normalize_email(form.get("email", ""))
    except InvalidAddress:
        return None
    if not hmac.compare_digest(form.get("password", "").encode(), DEMO_PASSWORD.encode()):
        return None
    return UserInfo(email=email, name=email.split("@", 1)[0], subject=email)


def demo_provider() -> CredentialsProvider:
    return CredentialsProvider(
        id="demo", name="Demo account (development only)", fields=DEFAULT_FIELDS, demo=True
    )


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
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
    return CredentialsProvider(
        id=entry["id"], name=str(entry.get("name", "Credentials")), fields=fields
    )
