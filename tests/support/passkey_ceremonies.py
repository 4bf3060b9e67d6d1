"""Passkey ceremonies through the real routes, as the page script runs them (JSON answers),
with the software authenticator of ``passkey_authenticator``."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient

from .passkey_authenticator import SoftAuthenticator

OPTIONS = "/auth/webauthn-options/passkey"
CALLBACK = "/auth/callback/passkey"
JSON_ANSWER = {"X-Auth-Return-Redirect": "1"}


class Passkeys:
    """One browser's passkey ceremonies through the real routes, as the page script runs
    them (JSON answers), with a software authenticator."""

    def __init__(self, client: FlaskClient, authenticator: SoftAuthenticator | None = None):
        self.client = client
        self.authenticator = authenticator or SoftAuthenticator()

    def options(self, action: str) -> dict[str, Any]:
        r = self.client.get(f"{OPTIONS}?action={action}")
        assert r.status_code == 200, r.get_data(as_text=True)
        assert r.json is not None and r.json["action"] == action
        return dict(r.json["options"])

    def post(self, action: str, data: Any, **fields: str) -> Any:
        csrf = self.client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
        body = data if isinstance(data, str) else json.dumps(data)
        form = {"csrfToken": csrf, "action": action, "data": body, **fields}
        return self.client.post(CALLBACK, data=form, headers=JSON_ANSWER)

    def register(self, name: str = "", **bend: Any) -> Any:
        return self.post(
            "register", self.authenticator.register(self.options("register"), **bend), name=name
        )

    def sign_in(self, **bend: Any) -> str:
        """Sign in with the authenticator's newest passkey; return the answer's URL."""
        response = self.authenticator.authenticate(self.options("authenticate"), **bend)
        answer = self.post("authenticate", response)
        assert answer.status_code == 200
        return str(answer.json["url"])

    def challenge_cookie(self) -> str | None:
        cookie = self.client.get_cookie("auth.passkey-challenge", path="/auth")
        return cookie.value if cookie else None
