"""The scenario that makes the audit trail write every event type (``drive_every_event``),
and what it needs: the secrets it uses in each form they might leak in (``Secrets``) and a
provider that refreshes, revokes and logs out over the back channel (``Provider``)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from freezegun import freeze_time
from joserfc import jwt

from webapp.second_factor import totp
from webapp.settings import current_settings
from webapp.storage.db import db
from webapp.storage.models import Session

from .audit import PASSWORDS, WRONG_PASSWORD, csrf_post, sign_in
from .config import TEST_SECRET
from .mail import CODE_RE, EmailActions, Mailbox, link_of, text_of
from .oauth import Browser, FakeIdP, FakeRequest, fake_idp
from .passkey_ceremonies import Passkeys
from .second_factor import (
    RECOVERY_CODE_PATTERN,
    enrol_authenticator,
    submit_second_factor,
    totp_code,
)

#: Addresses that name no user: the trail keeps them only as keyed hashes.
STRANGER = "stranger@example.com"
GUESSED = "mallory@example.com"
BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


class Secrets:
    """Every secret the scenario uses, in each form it might leak in."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.found: dict[str, str] = {"AUTH_SECRET": TEST_SECRET}
        self.codes: dict[str, str] = {}

    def add(self, label: str, value: str | None) -> None:
        if value:
            self.found[label] = value
            self.found[f"{label} (SHA-256)"] = hashlib.sha256(value.encode()).hexdigest()

    def add_keyed(self, label: str, purpose: str, value: str) -> None:
        """The secret and its keyed hash, as verification_tokens holds it."""
        self.add(label, value)
        with self.app.app_context():
            key = current_settings().derive_key(purpose)
        self.found[f"{label} (HMAC)"] = hmac.new(key, value.encode(), "sha256").hexdigest()

    def add_code(self, label: str, code: str) -> None:
        """A short code (six digits): its hashes anywhere, itself as a whole word (six
        digits occur by chance inside the hex of hashes and request ids)."""
        self.found[f"{label} (SHA-256)"] = hashlib.sha256(code.encode()).hexdigest()
        self.codes[label] = code

    def leaked(self, dump: str) -> set[str]:
        found = {label for label, value in self.found.items() if value in dump}
        # Times' microseconds are six digits too (PostgreSQL's as datetime(), SQLite's as
        # text): they are left out.
        times = re.sub(r"datetime\.datetime\((\d+, )*\d+|\d\d:\d\d:\d\d\.\d+", "", dump)
        words = set(re.findall(r"(?<![0-9A-Za-z])\d+(?![0-9A-Za-z])", times))
        return found | {label for label, code in self.codes.items() if code in words}

    def cookies(self, label: str, client: FlaskClient) -> None:
        for name in ("auth.session-token", "auth.csrf-token", "auth.email-browser"):
            for path in ("/", "/auth"):
                cookie = client.get_cookie(name, path=path)
                if cookie is not None:
                    self.add(f"{label} {name}", cookie.value)


class Provider:
    """The FakeIdP with refresh tokens that are due at once, a refresh grant, a revocation
    endpoint and the ``sid`` of each sign-in; it remembers every token it gave."""

    def __init__(self, fake: FakeIdP) -> None:
        self.fake = fake
        self.given: list[str] = []
        fake.discovery["revocation_endpoint"] = fake.issuer + "/revoke"
        fake.routes["/revoke"] = lambda request: (200, {}, {})
        fake.routes["/token"] = self._token
        fake.claims = {"sid": "sid-1"}

    def _token(self, request: FakeRequest) -> tuple[int, dict[str, str], Any]:
        if request.form.get("grant_type") == "refresh_token":
            body: dict[str, Any] = {
                "access_token": "at-" + secrets.token_urlsafe(12),
                "refresh_token": "rt-" + secrets.token_urlsafe(12),
                "token_type": "Bearer",
                "expires_in": 3600,
            }
            status, headers = 200, {}
        else:
            # Expiring within the refresh margin: the first ask refreshes it.
            self.fake.token_extra = {
                "refresh_token": "rt-" + secrets.token_urlsafe(12),
                "expires_in": 30,
            }
            status, headers, body = FakeIdP._token(self.fake, request)
        self.given += [str(v) for k, v in body.items() if k.endswith("token")]
        return status, headers, body

    def logout_token(self, sid: str) -> str:
        now = int(time.time())
        claims = {
            "iss": self.fake.issuer,
            "aud": self.fake.client_id,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(16),
            "events": {BACKCHANNEL_EVENT: {}},
            "sid": sid,
        }
        header = {"alg": "RS256", "kid": self.fake.sign_key.kid, "typ": "logout+jwt"}
        token = jwt.encode(header, claims, self.fake.sign_key, algorithms=["RS256"])
        self.given.append(token)
        return token


def drive_every_event(
    password_app: Callable[..., Flask], mailbox: Mailbox
) -> tuple[Flask, Secrets]:
    """Build an app (credentials, e-mail through ``mailbox``, an OpenID provider) and make
    its trail write every event type; return it and every secret the scenario used."""
    with fake_idp() as fake:
        provider = Provider(fake)
        app = password_app(
            [provider.fake.provider_config(backchannel_logout=True)],
            EMAIL_SERVER=mailbox.url(),
            AUTH_CREDENTIALS_IDENTIFIER_IP_LIMIT="2/15m",
            AUTH_SECOND_FACTOR_LIMIT="2/15m",
            AUTH_MAX_SESSIONS_PER_USER="2",
        )
        runner = app.test_cli_runner()
        found = Secrets(app)
        for email, password in PASSWORDS.items():
            found.add(f"{email}'s password", password)
        found.add("a wrong password", WRONG_PASSWORD)
        found.found.update({"an address of no user": STRANGER, "an identifier tried": GUESSED})

        # Credentials: a wrong password, a new user, an identifier guessed until throttled.
        ann = app.test_client()
        assert "error=CredentialsSignin" in sign_in(ann, "ann@example.com", WRONG_PASSWORD).location
        assert sign_in(ann, "ann@example.com").status_code == 302
        guesser = app.test_client()
        for _ in range(3):
            sign_in(guesser, GUESSED, WRONG_PASSWORD)

        # A provider linked while signed in, its token refreshed.
        browser = Browser(ann)
        assert "error" not in browser.sign_in("fake").location
        assert ann.get("/auth/token/fake").status_code == 200

        # A passkey added and removed.
        passkeys = Passkeys(ann)
        assert passkeys.register(name="Ann's key").status_code == 200
        with app.app_context():
            [passkey_id] = db.session.scalars(sa.text("SELECT id FROM authenticators")).all()
        csrf_post(ann, f"/account/passkeys/{passkey_id}/remove")

        # Sessions: one ended by the person, the others by "sign out everywhere else", one by
        # the provider (back-channel), the least recently used beyond the cap, by the operator.
        other = app.test_client()
        sign_in(other, "ann@example.com")
        with app.app_context():
            other_id = db.session.scalar(sa.select(sa.func.max(Session.id)))
        csrf_post(ann, f"/account/sessions/{other_id}/end")
        sign_in(app.test_client(), "ann@example.com")
        csrf_post(ann, "/account/sessions/end-others")
        provider.fake.claims = {"sid": "sid-2"}
        Browser(app.test_client()).sign_in("fake")
        answer = app.test_client().post(
            "/auth/backchannel-logout/fake", data={"logout_token": provider.logout_token("sid-2")}
        )
        assert answer.status_code == 200
        bobs = [app.test_client() for _ in range(3)]
        for client in bobs:
            sign_in(client, "bob@example.com")
        assert runner.invoke(args=["auth", "revoke", "--user", "bob@example.com"]).exit_code == 0
        for client in bobs:
            found.cookies("bob's browser", client)

        # E-mail: a link to a stranger, one used, used again; a code guessed until burnt.
        mail = EmailActions(app.test_client())
        mail.request_link(STRANGER)
        found.add_keyed(
            "the stranger's link token", "email-token", token_of(link_of(mailbox.last()))
        )
        mail.request_link("ann@example.com")
        link = link_of(mailbox.last())
        found.add_keyed("a link token", "email-token", token_of(link))
        found.add_keyed("its code", "email-code", code_of(mailbox))
        assert mail.post_link(link).status_code == 302
        assert "error=Verification" in mail.post_link(link).location
        mail.request_link("ann@example.com")
        code = code_of(mailbox)
        found.add_keyed("a code", "email-code", code)
        found.add(f"the code {code[:4]}-{code[4:]}", f"{code[:4]}-{code[4:]}")
        found.cookies("the e-mail browser", mail.client)
        for _ in range(5):
            mail.enter_code("ZZZZZZZZ")
        mail.client.post("/auth/signout", data={"csrfToken": mail.csrf()})

        # Two-step verification: turned on (its code spent), a recovery code signs in, new
        # recovery codes, wrong codes until the throttle, turned off.
        key, recovery = enrol_authenticator(ann)
        found.add("the TOTP key", key)
        found.add(f"the TOTP key {totp.grouped(key)}", totp.grouped(key))
        for steps in (-1, 0):  # the one enrolment typed (a step may have begun since)
            found.add_code(f"a TOTP code ({steps})", totp_code(key, steps=steps))
        for index, spare in enumerate(recovery):
            found.add(f"recovery code {index}", spare)
            found.add(f"recovery code {index} as checked", spare.replace("-", ""))
        rescued = app.test_client()
        sign_in(rescued, "ann@example.com")
        assert submit_second_factor(rescued, recovery[0]).status_code == 302
        found.cookies("a browser rescued by a recovery code", rescued)
        renewed = csrf_post(ann, "/account/two-factor/recovery-codes")
        assert renewed.status_code == 200
        for index, spare in enumerate(re.findall(RECOVERY_CODE_PATTERN, renewed.get_data(True))):
            found.add(f"new recovery code {index}", spare)
            found.add(f"new recovery code {index} as checked", spare.replace("-", ""))
        pending = app.test_client()
        sign_in(pending, "ann@example.com")
        for _ in range(3):
            submit_second_factor(pending, "000000")
        assert csrf_post(ann, "/account/two-factor/off").status_code == 303

        # The address changed: a link sent to the new address, followed.
        assert csrf_post(ann, "/account/email", email="ann.new@example.org").status_code == 303
        change = re.search(r"/account/email/confirm\?token=(\S+)", text_of(mailbox.last()))
        assert change
        found.add_keyed("the change of address's token", "email-change-token", change[1])
        assert csrf_post(ann, "/account/email/confirm", token=change[1]).status_code == 303
        # Unlinked (its tokens revoked at the provider), deleted; a session extended, expired.
        with app.app_context():
            fake_account = db.session.scalar(
                sa.text("SELECT id FROM accounts WHERE provider='fake'")
            )
        csrf_post(ann, f"/account/accounts/{fake_account}/unlink")
        found.cookies("ann's browser", ann)
        found.cookies("the guesser", guesser)
        assert csrf_post(ann, "/account/delete", confirm="DELETE").status_code == 303
        stale = app.test_client()
        sign_in(stale, "bob@example.com")
        found.cookies("a stale browser", stale)
        with freeze_time(datetime.now(UTC) + timedelta(days=2)):
            assert stale.get("/auth/session").json is not None
        with freeze_time(datetime.now(UTC) + timedelta(days=40)):
            assert runner.invoke(args=["auth", "cleanup"]).exit_code == 0

        for index, token in enumerate(provider.given):
            found.add(f"provider token {index}", token)

    return app, found


def token_of(link: str) -> str:
    match = re.search(r"[?&]token=([^&]+)", link)
    assert match
    return match[1]


def code_of(mailbox: Mailbox) -> str:
    body = mailbox.last().get_body(preferencelist=("plain",))
    assert body is not None
    match = CODE_RE.search(str(body.get_content()))
    assert match
    return match[1].replace("-", "")
