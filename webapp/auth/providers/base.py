"""What every sign-in provider is: the interface the views call, and what it answers.

A provider is a thin adapter from a request (form, query, method) to one flow in
``webapp.auth.flows``; it returns an ``Outcome`` (a redirect or a page) and never builds
a Flask response itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webapp.auth import urls


@dataclass(frozen=True)
class Redirect:
    """Send the browser to ``url``."""

    url: str


@dataclass(frozen=True)
class Page:
    """Render ``template`` with ``context``."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    status: int = 200


Outcome = Redirect | Page


class Provider:
    """A way to sign in. Subclasses implement ``signin`` and ``callback``."""

    #: oidc, oauth, email or credentials, as shown in ``GET providers``.
    type: str = ""
    #: Whether a POST to the callback must carry a CSRF token (not for form_post returns
    #: from an identity provider, which are cross-site by design and checked by state).
    callback_needs_csrf: bool = True

    def __init__(self, *, id: str, name: str) -> None:
        self.id = id
        self.name = name

    def public_json(self) -> dict[str, str]:
        """Return this provider's entry in ``GET providers``."""
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "signinUrl": urls.auth_url(f"signin/{self.id}"),
            "callbackUrl": urls.auth_url(f"callback/{self.id}"),
        }

    def signin(
        self, *, form: Mapping[str, str], query: Mapping[str, str], callback_url: str | None
    ) -> Outcome:
        """Handle ``POST signin/<id>``."""
        raise NotImplementedError

    def callback(
        self,
        *,
        method: str,
        args: Mapping[str, str],
        form: Mapping[str, str],
        callback_url: str | None,
    ) -> Outcome:
        """Handle ``GET``/``POST callback/<id>``."""
        raise NotImplementedError
