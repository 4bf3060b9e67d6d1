"""The credentials provider: the application's ``authorize`` hook checks a form.

Unlike Auth.js, a successful check creates a database session. Attempts are throttled per
identifier (the first field, usually the e-mail) and client address, counted in the
database before the hook runs (``ratelimit.admit``), so a burst of parallel guesses gets
no more hook calls than the limit; a right answer gives its count back. Once a limit is
reached, attempts are refused without calling the hook, with the same
``CredentialsSignin`` answer, until the window ends (docs/security.md, "Throttles").
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import request

from webapp.auth import known_browsers, ratelimit, urls
from webapp.auth.accounts import resolve_user
from webapp.auth.errors import AuthError
from webapp.auth.hooks import UserInfo, current_hooks
from webapp.auth.providers import Outcome, Provider, Redirect, register_kind
from webapp.auth.signin import finish_signin
from webapp.settings import ConfigError, Settings

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
        identifier = f"{self.id}:{submitted[self.fields[0].name].strip().lower()}"
        conf = urls.settings()
        counted = ratelimit.admit(
            ratelimit.signin_checks(
                scope="credentials",
                identifier=identifier,
                address=request.remote_addr,
                ip_limit=conf.credentials_ip_limit,
                identifier_ip_limit=conf.credentials_identifier_ip_limit,
                identifier_limit=conf.credentials_identifier_limit,
            )
        )
        if counted is None:
            raise AuthError("CredentialsSignin", "rate limited")

        info = self._authorize(submitted)
        if info is None or not (info.subject or info.email):
            raise AuthError("CredentialsSignin", "authorize hook rejected the attempt")
        # A right answer was no guess: it gives its count back, and this browser is known.
        ratelimit.release(counted)
        known_browsers.remember(ratelimit.identifier_hash(identifier))

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
