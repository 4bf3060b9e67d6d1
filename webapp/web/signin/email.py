"""Signing in by e-mail. ``POST signin/<id>`` sends the message. ``callback/<id>``: GET (and
HEAD) on the link shows the confirmation page and spends nothing; POST with ``token`` spends
the link; POST with ``code`` spends the one-time code of the request this browser made."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request

from webapp.flows.signin.email import (
    CodeRejected,
    browser_cookie_name,
    check_email_link,
    complete_email_code,
    complete_email_link,
    start_email_signin,
)
from webapp.providers.email import EmailProvider
from webapp.web.signin.outcome import Outcome, Page, Redirect


def signin(
    provider: EmailProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    return Redirect(
        start_email_signin(
            provider_id=provider.id,
            email=str(form.get("email", ""))[:1024],
            callback_url=callback_url,
            ip=request.remote_addr,
            mailer=provider.mailer,
        )
    )


def callback(
    provider: EmailProvider,
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
            provider_id=provider.id, email=str(args.get("email", "")), token=token
        )
        return Page(
            "auth/email_confirm.html",
            {
                "provider_id": provider.id,
                "email": email,
                "token": token,
                "callback_url": callback_url,
            },
        )
    if "code" in form:
        result = complete_email_code(
            provider_id=provider.id,
            code=str(form.get("code", ""))[:64],
            browser=request.cookies.get(browser_cookie_name()),
            callback_url=callback_url,
        )
        if isinstance(result, CodeRejected):
            return Page(
                "auth/verify_request.html",
                {"provider": provider.id, "type": provider.type, "code_rejected": result},
                status=400,
            )
        return Redirect(result)
    return Redirect(
        complete_email_link(
            provider_id=provider.id,
            email=str(form.get("email", "")),
            token=str(form.get("token", "")),
            callback_url=callback_url,
        )
    )
