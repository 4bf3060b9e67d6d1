"""The credentials provider: the application's ``authorize`` hook checks a form.

Unlike Auth.js, a successful check creates a database session. Failed attempts are
limited per client IP and per identifier (the first field, usually the e-mail), counted
in the database; once a limit is reached, attempts are refused without calling the hook,
with the same ``CredentialsSignin`` answer, until the window ends.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import request

from ...settings import ConfigError, Settings
from .. import ratelimit, urls
from ..accounts import resolve_user
from ..errors import AuthError
from ..hooks import UserInfo, current_hooks
from ..signin import finish_signin
from . import Outcome, Provider, Redirect, register_kind

#: The demo hook's only password. The demo exists in development only (settings refuse it
#: elsewhere) so that a fresh clone can be signed in to with no provider configured.
DEMO_PASSWORD = "demo"


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    type: str = "text"


DEFAULT_FIELDS = (
    Field("email", "E-mail", "email"),
    Field("password", "Password", "password"),
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
        identifier = submitted[self.fields[0].name].strip().lower()
        conf = urls.settings()
        ip_key = f"credentials-ip:{request.remote_addr}"
        id_key = f"credentials-id:{self.id}:{identifier}"
        if ratelimit.exceeded(ip_key, conf.credentials_ip_limit) or ratelimit.exceeded(
            id_key, conf.credentials_identifier_limit
        ):
            raise AuthError("CredentialsSignin", f"rate limited ({request.remote_addr})")

        info = self._authorize(submitted)
        if info is None or not (info.subject or info.email):
            ratelimit.hit(ip_key, conf.credentials_ip_limit)
            ratelimit.hit(id_key, conf.credentials_identifier_limit)
            raise AuthError("CredentialsSignin", "authorize hook rejected the attempt")

        resolved = resolve_user(
            provider=self.id,
            provider_type=self.type,
            subject=str(info.subject or info.email),
            info=info,
            current_user_id=None,
            # The application's own hook vouched for this person.
            allow_email_linking=True,
            create_error="CredentialsSignin",
        )
        return Redirect(finish_signin(resolved, provider=self.id, callback_url=callback_url))

    def _authorize(self, submitted: Mapping[str, str]) -> UserInfo | None:
        if self.demo:
            return _demo_authorize(submitted)
        hook = current_hooks().authorize
        if hook is None:
            raise AuthError("Configuration", f"credentials provider {self.id!r} has no hook")
        return hook(submitted)


def _demo_authorize(form: Mapping[str, str]) -> UserInfo | None:
    """Accept any well-formed address with DEMO_PASSWORD (development only)."""
    email = form.get("email", "").strip().lower()
    password = form.get("password", "")
    if "@" not in email or len(email) > 254:
        return None
    if not hmac.compare_digest(password.encode(), DEMO_PASSWORD.encode()):
        return None
    return UserInfo(email=email, name=email.split("@", 1)[0], subject=email)


def demo_provider() -> CredentialsProvider:
    return CredentialsProvider(
        id="demo", name="Demo account (development only)", fields=DEFAULT_FIELDS, demo=True
    )


def _build(entry: Mapping[str, Any], conf: Settings) -> Provider:
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


register_kind("credentials", _build)
