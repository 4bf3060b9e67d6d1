"""Signing in with credentials: the provider's fields from the form, checked by the
application's hook (Auth.js posts them to the callback; ``POST signin/<id>`` is accepted the
same way)."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request

from webapp.errors import AuthError
from webapp.flows.signin.credentials import authorize_with, complete_credentials_signin
from webapp.providers.credentials import CredentialsProvider
from webapp.web.signin.outcome import Outcome, Redirect


def signin(
    provider: CredentialsProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    return callback(provider, method="POST", args=query, form=form, callback_url=callback_url)


def callback(
    provider: CredentialsProvider,
    *,
    method: str,
    args: Mapping[str, str],
    form: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    if method != "POST":
        raise AuthError("CredentialsSignin", "credentials callback needs POST")
    submitted = {f.name: str(form.get(f.name, ""))[:1024] for f in provider.fields}
    return Redirect(
        complete_credentials_signin(
            provider_id=provider.id,
            submitted=submitted,
            identifier=submitted[provider.fields[0].name],
            authorize=authorize_with(provider),
            client_address=request.remote_addr,
            callback_url=callback_url,
        )
    )
