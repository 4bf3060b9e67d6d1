"""Signing in by e-mail. ``POST signin/<id>`` sends the message. ``callback/<id>``: GET (and
HEAD) on the link shows the confirmation page and spends nothing; POST with ``token`` spends
the link; POST with ``code`` spends the one-time code of the request this browser made."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request

from webapp.browser_state import cookies
from webapp.core import urls
from webapp.flows.signin.email import (
    CodeRejected,
    browser_cookie_name,
    check_email_link,
    complete_email_code,
    complete_email_link,
    purpose_of,
    start_email_signin,
)
from webapp.i18n import COOKIE_MAX_AGE, known_codes, language_choices, locale_cookie_name
from webapp.providers.email import EmailProvider
from webapp.sessions.store import current_session
from webapp.web.signin.outcome import Outcome, Page, Redirect


def signin(
    provider: EmailProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    session = current_session()
    return Redirect(
        start_email_signin(
            provider_id=provider.id,
            email=str(form.get("email", ""))[:1024],
            callback_url=callback_url,
            ip=request.remote_addr,
            mailer=provider.mailer,
            # From /account/confirm: what the message confirms, for this session's address.
            purpose=str(form.get("purpose", "")),
            signed_in_as=session.user.email if session is not None else None,
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

        def here(**extra: str) -> str:
            # The link's own address: its query, never the Referer, names the way back.
            query = {"token": token, "email": email, "callbackUrl": callback_url}
            return urls.auth_url(f"callback/{provider.id}", **query, **extra)

        chosen = args.get("lang")
        if chosen in known_codes():
            # A footer link of this page: keep the language, then show the page again.
            cookies.set_cookie(locale_cookie_name(), str(chosen), max_age=COOKIE_MAX_AGE)
            return Redirect(here())
        return Page(
            "auth/email_confirm.html",
            {
                "provider_id": provider.id,
                "email": email,
                "token": token,
                "callback_url": callback_url,
                "here_languages": [
                    (choice, here(lang=choice.code), current)
                    for choice, current in language_choices()
                ],
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
                {
                    "provider": provider.id,
                    "type": provider.type,
                    "code_rejected": result,
                    "purpose": purpose_of(str(form.get("purpose", ""))),
                },
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
