"""Signing in through an OAuth 2 or OpenID Connect provider: the authorization request, and
the provider's return to the callback (a query, or a form_post)."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request

from webapp.flows.signin.oauth import complete_oauth_callback, start_oauth_signin
from webapp.providers.oauth import OAuthProvider
from webapp.web.signin.outcome import Outcome, Redirect


def signin(
    provider: OAuthProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    return Redirect(start_oauth_signin(provider.client, query=query, callback_url=callback_url))


def callback(
    provider: OAuthProvider,
    *,
    method: str,
    args: Mapping[str, str],
    form: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    return Redirect(
        complete_oauth_callback(
            provider.client,
            method=method,
            args=args,
            form=form,
            client_address=request.remote_addr,
        )
    )
