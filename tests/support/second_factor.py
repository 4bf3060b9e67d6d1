"""Two-step verification as a person goes through it: the authenticator app's codes
(``totp_code``), turning it on through the account pages (``enrol_authenticator``), and
answering the second-factor page (``submit_second_factor``)."""

from __future__ import annotations

import time
from typing import Any

from flask.testing import FlaskClient

#: The key the set-up page shows (in groups of four), and each recovery code it shows once.
TOTP_KEY_PATTERN = r'<code class="secret" id="totp-key"[^>]*>([A-Z2-7 ]+)</code>'
RECOVERY_CODE_PATTERN = r"<li><code>([a-z2-7]{4}(?:-[a-z2-7]{4}){3})</code></li>"


def totp_code(secret: str, at: float | None = None, *, steps: int = 0) -> str:
    """The authenticator app's code for ``secret`` (base32) at ``at`` (epoch seconds; now by
    default, which freezegun freezes), ``steps`` 30-second steps later (or earlier)."""
    import pyotp

    moment = time.time() if at is None else at
    return str(pyotp.TOTP(secret).generate_otp(int(moment) // 30 + steps))


def enrol_authenticator(client: FlaskClient) -> tuple[str, list[str]]:
    """Turn two-step verification on for ``client``'s signed-in user through the account
    pages, as a person would (read the key, type the app's current code); return the key
    (base32, no spaces) and the ten recovery codes. Spends the current time step."""
    import re

    page = client.get("/account/two-factor")
    assert page.status_code == 200, page.headers.get("Location")
    found = re.search(TOTP_KEY_PATTERN, page.get_data(as_text=True))
    assert found, page.get_data(as_text=True)
    key = found[1].replace(" ", "")
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    done = client.post("/account/two-factor", data={"csrfToken": csrf, "code": totp_code(key)})
    assert done.status_code == 200, done.status_code
    codes = re.findall(RECOVERY_CODE_PATTERN, done.get_data(as_text=True))
    assert len(codes) == 10, done.get_data(as_text=True)
    return key, codes


def submit_second_factor(client: FlaskClient, code: str, **kwargs: Any) -> Any:
    """POST ``code`` to the second-factor page as its form does (``kwargs`` go to the POST:
    ``environ_base``…); return the answer: a 302 to the sign-in's callbackUrl, a 400 page
    for a wrong code, or a 302 to the error route."""
    csrf = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
    return client.post("/auth/second-factor", data={"csrfToken": csrf, "code": code}, **kwargs)
