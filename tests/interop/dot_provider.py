"""django-oauth-toolkit (DOT) as an identity provider the suite starts itself, on loopback.

``DotProvider`` runs the small Django project in ``tests/interop/django_provider`` (one
process, ``python -m tests.interop.django_provider``) on a free loopback port, with a fresh
SQLite database in its own directory. Its issuer is ``http://127.0.0.1:<port>/o`` (DOT
mounted under ``/o/``, as its tutorial does). Everything the project knows (users,
Applications, signing keys) is written here into its ``config.json``.

What a test needs from the provider's side:

* signing in: ``authorize`` follows a browser (a ``requests.Session``) through DOT's
  login page and, for the one Application that asks (``CONSENT_CLIENT``), its consent
  form, back to the app; ``sign_in`` does a whole sign-in through the app;
* the device grant: ``approve_device`` approves or denies a user code on DOT's pages;
* tokens: ``introspect`` (DOT's RFC 7662 endpoint), ``refresh_token_live`` and
  ``access_token_exists`` (DOT's database: DOT never introspects a refresh token as
  active), ``requests`` (what reached DOT: the project's request log, no secrets);
* logout: ``end_session`` takes a browser through DOT's RP-initiated logout pages,
  ``logged_in`` tells whether a browser still has a session at DOT;
* keys: ``rotate_key`` restarts DOT with a new signing key, the old one kept in its JWKS
  (``OIDC_RSA_PRIVATE_KEYS_INACTIVE``), as an operator rotates DOT's key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import requests
from joserfc.jwk import RSAKey

from ..support.oauth import APP_ORIGIN, Browser, parse_forms, provider_table
from ..support.servers import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
#: Every user's password at DOT.
PASSWORD = "dot-password-" + "p" * 12
#: The client secret of every confidential Application.
SECRET = "dot-client-secret-" + "s" * 40
#: The people DOT knows. Django has no "verified address": ``verified`` puts the user in
#: the group whose addresses the project's validator calls verified.
USERS: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@example.com", "verified": True, "name": "Alice"},
    "bob": {"email": "bob@example.com", "verified": False, "name": "Bob"},
    "carol": {"name": "Carol"},
}
#: The code-flow Applications (authorization-code grant, RS256, skip_authorization): client
#: id -> the token_endpoint_auth_method the app uses with it. DOT authenticates a client
#: with HTTP Basic or with the secret in the form body, whichever it is sent (one
#: confidential Application serves both), and a public one by its client_id alone.
CLIENT_METHODS = {
    "dot-basic": "client_secret_basic",
    "dot-post": "client_secret_post",
    "dot-public": "none",
}
#: Confidential Applications the app authenticates to with a client assertion (RFC 7523):
#: DOT 3.4.1 does not take one (it reads only HTTP Basic and client_secret in the body).
UNSUPPORTED_METHODS = {
    "dot-jwt": "client_secret_jwt",
    "dot-rsa": "private_key_jwt",
}
#: An Application that shows DOT's consent form (skip_authorization off).
CONSENT_CLIENT = "dot-consent"
#: Device Applications (DOT ties one grant type to an Application): client id -> method.
DEVICE_CLIENT_METHODS = {
    "dot-device": "client_secret_basic",
    "dot-device-post": "client_secret_post",
    "dot-device-public": "none",
}
#: The polling interval DOT advertises for device codes (DEVICE_FLOW_INTERVAL), seconds.
DEVICE_INTERVAL = 1
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
POST_LOGOUT_REDIRECT_URI = f"{APP_ORIGIN}/auth/signout/callback"


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


#: Every Application's client id -> the app's token_endpoint_auth_method with it.
METHODS = {
    **CLIENT_METHODS,
    **UNSUPPORTED_METHODS,
    CONSENT_CLIENT: "client_secret_basic",
    **DEVICE_CLIENT_METHODS,
}


class DotProvider:
    """DOT in a process of its own (``start``/``stop``), its issuer ``<origin>/o``, one
    Application per client of ``METHODS``; see the module's docstring for the helpers."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.issuer = self.origin + "/o"
        self.process: subprocess.Popen[str] | None = None
        #: Seconds the last start took, until DOT answered (migrations and seeding included).
        self.start_seconds = 0.0
        self._keys: list[RSAKey] = []
        self._new_key()
        #: Our client's key for private_key_jwt (DOT never reads it: see UNSUPPORTED_METHODS).
        rp_key = RSAKey.generate_key(2048, parameters={"kid": "rp-rsa"})
        (workdir / "rp-rsa.pem").write_bytes(rp_key.as_pem(private=True))

    # -- the process -------------------------------------------------------------------

    def _new_key(self) -> None:
        key = RSAKey.generate_key(2048)
        (self.workdir / f"signing-{len(self._keys)}.pem").write_bytes(key.as_pem(private=True))
        self._keys.append(key)

    @property
    def active_kid(self) -> str:
        """The kid of DOT's signing key: DOT names a key by its RFC 7638 thumbprint."""
        return str(self._keys[-1].thumbprint())

    def _config(self) -> dict[str, Any]:
        apps: list[dict[str, Any]] = []
        for client_id, method in METHODS.items():
            device = client_id in DEVICE_CLIENT_METHODS
            app: dict[str, Any] = {
                "client_id": client_id,
                "name": f"Webapp {'TV ' if device else ''}({method})",
                "client_type": "public" if method == "none" else "confidential",
                "grant_type": DEVICE_GRANT if device else "authorization-code",
                "secret": None if method == "none" else SECRET,
            }
            if not device:
                app["redirect_uris"] = [f"{APP_ORIGIN}/auth/callback/{client_id}"]
                app["post_logout_redirect_uris"] = [POST_LOGOUT_REDIRECT_URI]
                app["skip_authorization"] = client_id != CONSENT_CLIENT
            apps.append(app)
        keys = [str(self.workdir / f"signing-{i}.pem") for i in range(len(self._keys))]
        return {
            "port": self.port,
            "issuer": self.issuer,
            "signing_key": keys[-1],
            "inactive_keys": keys[:-1],
            "device_interval": DEVICE_INTERVAL,
            "password": PASSWORD,
            "users": [{"username": name, **person} for name, person in USERS.items()],
            "applications": apps,
        }

    def start(self) -> None:
        (self.workdir / "config.json").write_text(json.dumps(self._config()))
        env = {**os.environ, "DOT_PROVIDER_DIR": str(self.workdir)}
        began = time.monotonic()
        with (self.workdir / "server.log").open("a") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.interop.django_provider"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until ready, or EOF if it died
        if not line.startswith("ready "):
            self.stop()
            log = (self.workdir / "server.log").read_text()[-3000:]
            raise RuntimeError(f"django-oauth-toolkit did not start:\n{log}")
        self.start_seconds = time.monotonic() - began

    def stop(self) -> None:
        stop_process(self.process)

    def rotate_key(self) -> str:
        """Restart DOT with a new signing key, the old ones still in its JWKS (inactive);
        return the new key's kid. The database (users, tokens, sessions) is kept."""
        self._new_key()
        self.stop()
        self.start()
        return self.active_kid

    def server_log(self) -> str:
        """DOT's stderr so far (Django's error log: tracebacks of 500s)."""
        return (self.workdir / "server.log").read_text()

    # -- metadata ----------------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        """DOT's OpenID Connect discovery document."""
        answer = requests.get(self.issuer + "/.well-known/openid-configuration", timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def rfc8414_metadata(self) -> dict[str, Any]:
        """DOT's RFC 8414 document, where this mount serves it: under the issuer."""
        answer = requests.get(self.issuer + "/.well-known/oauth-authorization-server", timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def jwks_kids(self) -> list[str]:
        answer = requests.get(self.discovery()["jwks_uri"], timeout=10)
        return [str(key["kid"]) for key in answer.json()["keys"]]

    def endpoint(self, name: str) -> str:
        """One of DOT's endpoints (named as in RFC 8414), from its RFC 8414 document."""
        return str(self.rfc8414_metadata()[name])

    def provider_config(self, client_id: str, **extra: Any) -> dict[str, Any]:
        """The app's [[providers]] table for one of DOT's Applications: the issuer alone
        (endpoints from discovery), the client id and how it authenticates; ``extra`` adds
        or overrides keys (e.g. ``revocation_endpoint=dot.endpoint("revocation_endpoint")``).
        The provider id in the app is the client id."""
        method = METHODS[client_id]
        key_file = self.workdir / "rp-rsa.pem" if method == "private_key_jwt" else None
        return provider_table(
            client_id,
            name=f"DOT ({method})",
            issuer=self.issuer,
            method=method,
            secret=SECRET,
            key_file=key_file,
            extra=extra,
        )

    # -- browsers at DOT ---------------------------------------------------------------

    def log_in(self, session: requests.Session, username: str = "alice") -> None:
        """Sign the browser ``session`` in at DOT (Django's login page) as ``username``."""
        page = session.get(self.origin + "/accounts/login/", timeout=10)
        self._log_in_on(session, page, username)
        assert self.logged_in(session)

    def _log_in_on(self, session: requests.Session, page: requests.Response, username: str) -> Any:
        """Submit the login page ``page`` as ``username``; return DOT's answer (a 302)."""
        [form] = [f for f in parse_forms(page.text) if f.id == "login"]
        fields = {**form.fields, "username": username, "password": PASSWORD}
        answer = session.post(
            urljoin(page.url, form.action), data=fields, allow_redirects=False, timeout=10
        )
        assert answer.status_code == 302, f"DOT refused {username}'s password: {answer.text}"
        return answer

    def authorize(
        self, session: requests.Session, url: str, username: str = "alice", *, allow: bool = True
    ) -> str:
        """Follow the browser ``session`` from ``url`` (DOT's authorization endpoint, as
        the app built it) until DOT sends it back to the app; return that URL. DOT's login
        page is answered as ``username`` (a browser already signed in at DOT is not asked
        again); its consent form (``CONSENT_CLIENT`` only) with Authorize, or Cancel
        when ``allow`` is false."""
        for _ in range(10):
            if url.startswith(APP_ORIGIN + "/"):
                return url
            answer = session.get(url, allow_redirects=False, timeout=10)
            if answer.status_code == 200:
                forms = {f.id: f for f in parse_forms(answer.text)}
                if "login" in forms:
                    answer = self._log_in_on(session, answer, username)
                elif "authorizationForm" in forms:
                    # The parsed fields hold the submit buttons too: Authorize is "allow".
                    fields = dict(forms["authorizationForm"].fields)
                    if not allow:
                        del fields["allow"]
                    answer = session.post(
                        answer.url, data=fields, allow_redirects=False, timeout=10
                    )
            if answer.status_code not in (302, 303):
                raise AssertionError(f"DOT answered {answer.status_code}: {answer.text[:2000]}")
            url = urljoin(url, answer.headers["Location"])
        raise AssertionError("too many redirects at DOT")

    def sign_in(
        self,
        browser: Browser,
        provider_id: str,
        username: str = "alice",
        *,
        callback_url: str | None = None,
    ) -> Any:
        """A whole sign-in through the app as ``username``; return the app's answer to the
        callback."""
        start = browser.start(provider_id, callback_url=callback_url)
        assert start.status_code == 302, start.headers.get("Location")
        return browser.client.get(self.authorize(browser.idp, start.headers["Location"], username))

    def logged_in(self, session: requests.Session) -> bool:
        """Whether the browser ``session`` has a session at DOT (its authorization endpoint
        asks for no login)."""
        answer = session.get(self.issuer + "/authorize/", allow_redirects=False, timeout=10)
        return not (
            answer.status_code == 302 and "/accounts/login/" in answer.headers.get("Location", "")
        )

    def end_session(self, session: requests.Session, url: str, *, confirm: bool = True) -> str:
        """Take the browser ``session`` through DOT's end_session endpoint at ``url`` (as the
        app built it): DOT asks for confirmation (OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT),
        answered Logout (or Cancel); return where DOT sends the browser."""
        answer = session.get(url, allow_redirects=False, timeout=10)
        assert answer.status_code == 200, f"DOT answered {answer.status_code}: {answer.text}"
        [form] = parse_forms(answer.text)
        fields = dict(form.fields)  # with the submit buttons: Logout is "allow"
        if not confirm:
            del fields["allow"]
        done = session.post(answer.url, data=fields, allow_redirects=False, timeout=10)
        assert done.status_code == 302, f"DOT answered {done.status_code}: {done.text}"
        return urljoin(url, done.headers["Location"])

    # -- the device grant --------------------------------------------------------------

    def approve_device(
        self, user_code: str, username: str = "alice", *, approve: bool = True
    ) -> str:
        """In a fresh browser signed in at DOT as ``username``, enter ``user_code`` on DOT's
        device page, then Accept (or, ``approve=False``, Deny); return the status DOT shows
        at the end ("Authorized", "Denied")."""
        session = requests.Session()
        self.log_in(session, username)
        page = session.get(self.issuer + "/device/?" + urlencode({"user_code": user_code}))
        [form] = parse_forms(page.text)  # the code is filled in from the query
        assert form.fields.get("user_code") == user_code, page.text
        confirm = session.post(page.url, data=form.fields, timeout=10)
        [form] = parse_forms(confirm.text)
        assert "/device-confirm/" in confirm.url, confirm.text[:2000]
        fields = {**form.fields, "action": "accept" if approve else "deny"}
        status = session.post(confirm.url, data=fields, timeout=10)
        shown = re.search(r"<h1>\s*Device (\w+)\s*</h1>", status.text)
        assert "/device-grant-status/" in status.url and shown, status.text[:2000]
        return shown[1]

    # -- tokens, from DOT's side -------------------------------------------------------

    def introspect(self, token: str, client_id: str = "dot-basic") -> dict[str, Any]:
        """DOT's RFC 7662 answer about ``token``, asked by a confidential Application."""
        answer = requests.post(
            self.endpoint("introspection_endpoint"),
            data={"token": token},
            auth=(client_id, SECRET),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def revoke(self, token: str, hint: str, client_id: str = "dot-basic") -> None:
        """Revoke ``token`` at DOT (RFC 7009) as a confidential Application of its owner."""
        answer = requests.post(
            self.endpoint("revocation_endpoint"),
            data={"token": token, "token_type_hint": hint},
            auth=(client_id, SECRET),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text

    def _db(self) -> sqlite3.Connection:
        uri = f"file:{self.workdir / 'dot.sqlite3'}?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=20)

    def refresh_token_live(self, token: str) -> bool | None:
        """Whether DOT still takes ``token`` as a refresh token: True, False (revoked), or
        None (DOT has no such refresh token). Read from DOT's database, since DOT's
        introspection answers only for access tokens."""
        with self._db() as db:
            rows = db.execute(
                "SELECT revoked FROM oauth2_provider_refreshtoken WHERE token_checksum = ?",
                (sha256(token),),
            ).fetchall()
        if not rows:
            return None
        return any(revoked is None for (revoked,) in rows)

    def access_token_exists(self, token: str) -> bool:
        """Whether DOT's database still holds the access token (DOT deletes revoked ones)."""
        with self._db() as db:
            found = db.execute(
                "SELECT count(*) FROM oauth2_provider_accesstoken WHERE token_checksum = ?",
                (sha256(token),),
            ).fetchone()
        return bool(found[0])

    def requests(self, path: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The requests that reached DOT under ``/o/`` so far, oldest first (from the
        project's request log): dicts with method, path, status, fields (the form's field
        names), basic_client_id, client_id, grant_type, token_type_hint and the SHA-256 of
        any token, refresh_token or device_code sent (``token_sha256``…). ``path`` (after
        the issuer, e.g. "/token/") and ``match`` (field == value) filter them."""
        log = self.workdir / "requests.jsonl"
        found = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        if path is not None:
            found = [r for r in found if r["path"] == "/o" + path]
        return [r for r in found if all(r.get(k) == v for k, v in match.items())]

    @staticmethod
    def client_of(request: dict[str, Any]) -> str | None:
        """The client a logged request authenticated as, however it did."""
        found = request["basic_client_id"] or request["client_id"]
        return str(found) if found is not None else None
