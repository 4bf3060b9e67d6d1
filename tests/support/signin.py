"""Signing a Flask test client in through the real routes with the development demo
credentials: ``demo_sign_in``, and ``AuthActions`` (the ``auth`` fixture) for sign-in,
sign-out and the session cookie."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

DEMO_EMAIL = "ann@example.com"
DEMO_PASSWORD = "demo"


def demo_sign_in(
    client: FlaskClient,
    email: str = DEMO_EMAIL,
    password: str = DEMO_PASSWORD,
    *,
    headers: dict[str, str] | None = None,
    base_url: str | None = None,
    **form: str,
) -> Any:
    """POST the demo credentials form (development provider) as a browser would.

    Fetches a CSRF token first; ``form`` adds fields (``callbackUrl``…), ``headers`` and
    ``base_url`` go to the POST (``base_url`` to the token request as well). Returns the
    app's answer: a 302 home (or to ``callbackUrl``) on success, to ``?error=`` otherwise.
    """
    csrf = client.get("/auth/csrf", base_url=base_url).json["csrfToken"]  # type: ignore[index]
    data = {"csrfToken": csrf, "email": email, "password": password, **form}
    return client.post("/auth/callback/demo", data=data, headers=headers, base_url=base_url)


class AuthActions:
    """Sign-in actions through the real routes (the demo credentials provider)."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client

    def csrf(self) -> str:
        return str(self.client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]

    def signin(self, email: str = DEMO_EMAIL, password: str = DEMO_PASSWORD, **form: Any) -> Any:
        """``demo_sign_in`` with this client (``form`` may hold ``headers`` and ``base_url``)."""
        return demo_sign_in(self.client, email, password, **form)

    def signout(self, **form: str) -> Any:
        return self.client.post("/auth/signout", data={"csrfToken": self.csrf(), **form})

    def session_cookie(self) -> str | None:
        cookie = self.client.get_cookie("auth.session-token")
        return cookie.value if cookie else None
