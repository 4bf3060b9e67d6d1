"""Signing in through a SAML 2.0 identity provider: the AuthnRequest (HTTP-Redirect), and
the IdP's return to the assertion consumer (``callback/<id>``, HTTP-POST only)."""

from __future__ import annotations

from collections.abc import Mapping

from webapp.errors import AuthError
from webapp.flows.signin.saml import complete_saml_callback, start_saml_signin
from webapp.providers.saml import SamlProvider
from webapp.web.signin.outcome import Outcome, Redirect


def signin(
    provider: SamlProvider,
    *,
    form: Mapping[str, str],
    query: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    return Redirect(start_saml_signin(provider, callback_url=callback_url))


def callback(
    provider: SamlProvider,
    *,
    method: str,
    args: Mapping[str, str],
    form: Mapping[str, str],
    callback_url: str | None,
) -> Outcome:
    if method != "POST":
        # The HTTP-POST binding only: a response in a URL would be in every log on its way.
        raise AuthError("OAuthCallback", f"{provider.id}: SAML response not posted")
    return Redirect(complete_saml_callback(provider, saml_response=form.get("SAMLResponse", "")))
