"""The e-mail provider: magic links and one-time codes, wired to the flows in email_signin.

``POST signin/<id>`` sends the message. ``callback/<id>``: GET (and HEAD) on the link shows
the confirmation page and spends nothing; POST with ``token`` spends the link; POST with
``code`` spends the one-time code of the request this browser made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import request

from webapp.auth.flows.email import (
    CodeRejected,
    browser_cookie_name,
    check_email_link,
    complete_email_code,
    complete_email_link,
    start_email_signin,
)
from webapp.auth.mail import Mailer, mailer_from_settings
from webapp.auth.providers.base import Outcome, Page, Provider, Redirect
from webapp.settings import ConfigError, Settings


class EmailProvider(Provider):
    type = "email"

    def __init__(self, *, id: str, name: str, mailer: Mailer) -> None:
        super().__init__(id=id, name=name)
        self.mailer = mailer

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        return Redirect(
            start_email_signin(
                provider_id=self.id,
                email=str(form.get("email", ""))[:1024],
                callback_url=callback_url,
                ip=request.remote_addr,
                mailer=self.mailer,
            )
        )

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        if method != "POST":
            # GET or HEAD, probably a mail scanner: show, never spend.
            token = str(args.get("token", ""))
            email = check_email_link(
                provider_id=self.id, email=str(args.get("email", "")), token=token
            )
            return Page(
                "auth/email_confirm.html",
                {
                    "provider_id": self.id,
                    "email": email,
                    "token": token,
                    "callback_url": callback_url,
                },
            )
        if "code" in form:
            result = complete_email_code(
                provider_id=self.id,
                code=str(form.get("code", ""))[:64],
                browser=request.cookies.get(browser_cookie_name()),
                callback_url=callback_url,
            )
            if isinstance(result, CodeRejected):
                return Page(
                    "auth/verify_request.html",
                    {
                        "provider": self.id,
                        "type": self.type,
                        "code_rejected": result,
                    },
                    status=400,
                )
            return Redirect(result)
        return Redirect(
            complete_email_link(
                provider_id=self.id,
                email=str(form.get("email", "")),
                token=str(form.get("token", "")),
                callback_url=callback_url,
            )
        )


def default_provider(conf: Settings) -> EmailProvider:
    """The provider EMAIL_SERVER (or a fresh development set-up) enables on its own."""
    return EmailProvider(id="email", name="Email", mailer=mailer_from_settings(conf))


def build(entry: Mapping[str, Any], conf: Settings) -> Provider:
    try:
        mailer = mailer_from_settings(conf)
    except ConfigError as exc:
        raise ConfigError(f"provider {entry['id']!r}: {exc}") from None
    return EmailProvider(id=entry["id"], name=str(entry.get("name", "Email")), mailer=mailer)
