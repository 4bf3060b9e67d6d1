"""Identity providers for the OAuth tests: the real oidc-provider (Node) and a Python fake.

``NodeOP`` runs ``tests/op/server.mjs`` (the npm package oidc-provider) on a free loopback
port, signing with a key the tests hold (``NodeOP.sign``), with RP-initiated logout,
back-channel logout and the device authorization grant (RFC 8628) enabled; see its
docstring for the test-only helpers. ``FakeIdP`` is a tiny provider in a thread whose
keys, ID token claims, userinfo and extra API routes each test chooses, for the failures a
real provider will not produce.
``Browser`` drives a sign-in through the app (Flask test client) and the provider (real
HTTP), following redirects by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import requests
from flask.testing import FlaskClient
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from .mail import EmailActions, Mailbox, link_of
from .servers import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
APP_ORIGIN = "http://localhost"
#: Accounts the Node provider knows; the authorization request's login_hint picks one.
ACCOUNTS: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@example.com", "email_verified": True, "name": "Alice"},
    "bob": {"email": "bob@example.com", "email_verified": False, "name": "Bob"},
    "carol": {"name": "Carol"},
    "ann": {"email": "ann@example.com", "email_verified": True, "name": "Ann at the OP"},
    # Someone else claiming Ann's address at a provider that does not verify it.
    "mallory": {"email": "ann@example.com", "email_verified": False, "name": "Mallory"},
}
SECRET = "op-client-secret-" + "s" * 40
#: Client id -> token endpoint auth method; the provider id in the app equals the client id.
CLIENT_METHODS = {
    "op-basic": "client_secret_basic",
    "op-post": "client_secret_post",
    "op-jwt": "client_secret_jwt",
    "op-rsa": "private_key_jwt",
    "op-ec": "private_key_jwt",
    "op-public": "none",
}
#: Another client of the same provider, not one of the app's providers: tokens it gets
#: (``NodeOP.cli_tokens``) belong to someone else's application.
CLI_CLIENT_ID = "op-cli"
CLI_REDIRECT_URI = f"{APP_ORIGIN}/cli-callback"
#: The provider's one resource server (RFC 8707); its access tokens are JWTs (RFC 9068).
API_RESOURCE = f"{APP_ORIGIN}/api"
API_SCOPE = "api:read"
#: The app's post_logout_redirect_uri, registered for the app's clients (CLIENT_METHODS).
POST_LOGOUT_REDIRECT_URI = f"{APP_ORIGIN}/auth/signout/callback"
#: The kid of the provider's signing key (RS256), which ``NodeOP.sign`` uses.
OP_KID = "op-rsa-1"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: Device flow clients (grant types device_code and refresh_token, no response types):
#: client id -> token endpoint auth method. op-device-short's device codes live
#: DEVICE_SHORT_TTL seconds (the others' 600).
DEVICE_CLIENT_METHODS = {
    "op-device": "client_secret_basic",
    "op-device-public": "none",
    "op-device-short": "client_secret_basic",
}
DEVICE_SHORT_TTL = 2
#: The polling interval the provider advertises for device codes, in seconds (RFC 8628
#: §3.2); polling a pending code sooner than that after the previous poll answers slow_down
#: and adds DEVICE_SLOW_DOWN_INCREMENT seconds to that code's interval.
DEVICE_INTERVAL = 1
DEVICE_SLOW_DOWN_INCREMENT = 5


def provider_table(
    client_id: str,
    *,
    name: str,
    issuer: str,
    method: str,
    secret: str,
    key_file: Path | None = None,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The app's [[providers]] table for an OpenID Provider's client (the provider id in
    the app is the client id): the secret for the ``client_secret_*`` methods, ``key_file``
    for ``private_key_jwt``; ``extra`` adds or overrides keys (``issuer`` too)."""
    entry: dict[str, Any] = {
        "id": client_id,
        "type": "oidc",
        "name": name,
        "issuer": issuer,
        "client_id": client_id,
        "token_endpoint_auth_method": method,
    }
    if method.startswith("client_secret"):
        entry["client_secret"] = secret
    if key_file is not None:
        entry["client_private_key_file"] = str(key_file)
    entry.update(extra)
    return entry


class NodeOP:
    """oidc-provider on loopback, with one client per token endpoint auth method (the app's
    providers, ``CLIENT_METHODS``), ``op-cli``, another application's client, and the device
    flow clients (``DEVICE_CLIENT_METHODS``).

    Its signing key is ``op_key`` (RSA, kid ``OP_KID``): ID tokens, logout tokens and JWT
    access tokens are signed with it, and ``sign`` signs anything else with it.

    Logout: ``end_session`` drives the provider's RP-initiated logout pages from a URL the
    app built; ``end_op_session`` ends a browser's provider session, which notifies every
    client of that session that has a ``backchannel_logout_uri`` (clients added with
    ``add_client``); ``backchannel_deliveries`` / ``wait_backchannel`` tell what was sent.

    Device flow: ``device_authorization`` and ``device_token`` talk to the provider as a
    device would; ``approve_device`` approves or denies a user_code through the provider's
    verification pages; ``expire_device_code`` ends a code's life at once; ``device_polls``
    lists the token endpoint polls. The provider advertises ``interval`` DEVICE_INTERVAL and
    answers slow_down to a pending code polled sooner than its interval after the previous
    poll (see tests/op/server.mjs).

    Introspection: ``introspection_requests`` lists the requests that sent a given token,
    with the provider's answer's status.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.op_key = RSAKey.generate_key(2048, parameters={"kid": OP_KID, "use": "sig"})
        self.rsa_key = RSAKey.generate_key(2048, parameters={"kid": "rp-rsa"})
        self.ec_key = ECKey.generate_key("P-256", parameters={"kid": "rp-ec"})
        # The RSA key as PEM, the EC key as a JWK file: both formats get exercised.
        (workdir / "rp-rsa.pem").write_bytes(self.rsa_key.as_pem(private=True))
        (workdir / "rp-ec.jwk").write_text(json.dumps(self.ec_key.as_dict(private=True)))
        self.process: subprocess.Popen[str] | None = None
        self._discovery: dict[str, Any] | None = None
        #: Clients added at run time (``add_client``): client id -> auth method.
        self.added_clients: dict[str, str] = {}

    def client_metadata(self, client_id: str, method: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "client_id": client_id,
            "redirect_uris": [
                CLI_REDIRECT_URI
                if client_id == CLI_CLIENT_ID
                else f"{APP_ORIGIN}/auth/callback/{client_id}"
            ],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        }
        if client_id != CLI_CLIENT_ID:
            meta["post_logout_redirect_uris"] = [POST_LOGOUT_REDIRECT_URI]
        if method in ("client_secret_basic", "client_secret_post", "client_secret_jwt"):
            meta["client_secret"] = SECRET
        if client_id == "op-rsa":
            meta["jwks"] = {"keys": [self.rsa_key.as_dict(private=False)]}
        if client_id == "op-ec":
            meta["jwks"] = {"keys": [self.ec_key.as_dict(private=False)]}
            meta["token_endpoint_auth_signing_alg"] = "ES256"
        return meta

    @staticmethod
    def device_client_metadata(client_id: str, method: str) -> dict[str, Any]:
        """A device flow client: no redirect URIs, no response types (oidc-provider demands
        redirect_uris as soon as a client has a response type, and defaults to "code")."""
        meta: dict[str, Any] = {
            "client_id": client_id,
            "grant_types": [DEVICE_GRANT, "refresh_token"],
            "response_types": [],
            "token_endpoint_auth_method": method,
        }
        if method != "none":
            meta["client_secret"] = SECRET
        return meta

    def _method(self, client_id: str) -> str:
        methods = {
            **CLIENT_METHODS,
            **DEVICE_CLIENT_METHODS,
            CLI_CLIENT_ID: "client_secret_basic",
            **self.added_clients,
        }
        return methods[client_id]

    def provider_config(
        self, client_id: str, *, method: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """The app's [[providers]] table for one of this provider's clients (those of
        ``CLIENT_METHODS``, ``DEVICE_CLIENT_METHODS`` or added by ``add_client``; give the
        ``method`` of one not added yet, e.g. before its app's port is known)."""
        method = method or self._method(client_id)
        key_file = {"op-rsa": "rp-rsa.pem", "op-ec": "rp-ec.jwk"}.get(client_id)
        return provider_table(
            client_id,
            name=f"Test OP ({method})",
            issuer=self.issuer,
            method=method,
            secret=SECRET,
            key_file=self.workdir / key_file if key_file else None,
            extra=extra,
        )

    def start(self) -> None:
        methods = {**CLIENT_METHODS, CLI_CLIENT_ID: "client_secret_basic"}
        clients = [self.client_metadata(c, m) for c, m in methods.items()]
        clients += [self.device_client_metadata(c, m) for c, m in DEVICE_CLIENT_METHODS.items()]
        config = {
            "port": self.port,
            "clients": clients,
            "accounts": ACCOUNTS,
            "api": {"resource": API_RESOURCE, "scope": API_SCOPE},
            "jwks": {"keys": [self.op_key.as_dict(private=True)]},
            "device": {
                "interval": DEVICE_INTERVAL,
                "slowDownIncrement": DEVICE_SLOW_DOWN_INCREMENT,
            },
            "clientSettings": {"op-device-short": {"deviceCodeTtl": DEVICE_SHORT_TTL}},
        }
        path = self.workdir / "op-config.json"
        path.write_text(json.dumps(config))
        self.process = subprocess.Popen(
            ["node", str(ROOT / "tests/op/server.mjs"), str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until ready, or EOF if it died
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"oidc-provider did not start (exit code {self.process.poll()})")

    def stop(self) -> None:
        stop_process(self.process)

    def discovery(self) -> dict[str, Any]:
        """The provider's metadata (/.well-known/openid-configuration)."""
        if self._discovery is None:
            url = self.issuer + "/.well-known/openid-configuration"
            self._discovery = requests.get(url, timeout=10).json()
        return self._discovery

    def grant_count(self, client_id: str, grant_type: str) -> int:
        """How many token endpoint grants of this type the client has obtained so far
        (``grant_type`` as sent: e.g. "refresh_token", or DEVICE_GRANT)."""
        counts = requests.get(self.issuer + "/__test/grants", timeout=10).json()
        return int(counts.get(f"{client_id} {grant_type}", 0))

    # -- JWTs signed with the provider's own key ----------------------------------------

    def sign(
        self, claims: Mapping[str, Any], header: Mapping[str, Any] | None = None, key: Any = None
    ) -> str:
        """A JWT with ``claims``, signed with the provider's key (RS256, kid OP_KID) unless
        ``key`` is given. ``header`` entries override the default header; a None value drops
        the entry (``{"kid": None}``), ``{"typ": "logout+jwt"}`` adds one, ``{"alg": ...}``
        changes the algorithm (give a ``key`` that fits it)."""
        merged = {"alg": "RS256", "kid": OP_KID, **(header or {})}
        merged = {k: v for k, v in merged.items() if v is not None}
        return jwt.encode(merged, dict(claims), key or self.op_key, algorithms=[merged["alg"]])

    def logout_token(
        self,
        client_id: str,
        sub: str | None = "alice",
        sid: str | None = None,
        *,
        header: Mapping[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A logout token shaped as oidc-provider makes them (header typ "logout+jwt"; iss,
        aud, iat, exp = iat + 120, jti, events, sub, sid when given), signed by ``sign``.
        ``claims`` override or, with None, drop claims; ``header`` as for ``sign``."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "aud": client_id,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(16),
            "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
            "sub": sub,
            "sid": sid,
        }
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return self.sign(payload, {"typ": "logout+jwt", **(header or {})})

    # -- clients added at run time --------------------------------------------------------

    def add_client(
        self,
        client_id: str,
        method: str = "client_secret_basic",
        *,
        auth_url: str = APP_ORIGIN + "/auth",
        backchannel_logout: bool | str = True,
        session_required: bool = True,
        device_interval: int | None = DEVICE_INTERVAL,
        device_code_ttl: int | None = None,
        amr: list[str] | None = None,
        **metadata: Any,
    ) -> dict[str, Any]:
        """Register (or replace) a client of the running provider; return its metadata.

        By default it is an app client like op-basic, for the app at ``auth_url`` (its
        AUTH_URL): redirect_uris ``{auth_url}/callback/<id>``, post_logout_redirect_uris
        ``{auth_url}/signout/callback``, and backchannel_logout_uri
        ``{auth_url}/backchannel-logout/<id>`` (``backchannel_logout`` True; a string is the
        URI itself; False registers none) with backchannel_logout_session_required
        ``session_required``. ``metadata`` adds or overrides client metadata (None drops an
        entry: e.g. ``grant_types=[DEVICE_GRANT, "refresh_token"], response_types=[],
        redirect_uris=None`` for a device client). ``device_interval`` is the interval
        advertised for its device codes (None: none), ``device_code_ttl`` their lifetime.
        ``amr``: the authentication methods (RFC 8176) a login for this client records, which
        its ID tokens then carry as their ``amr`` claim (None: no amr claim).
        The id must be new to the provider's configuration; ``provider_config`` knows it.
        Calling it again with the same id replaces the client (e.g. once a server's port,
        hence its AUTH_URL, is known: ``add_client(cid, auth_url=server.url + "/auth")``).
        """
        meta: dict[str, Any] = {
            "client_id": client_id,
            "redirect_uris": [f"{auth_url}/callback/{client_id}"],
            "post_logout_redirect_uris": [f"{auth_url}/signout/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        }
        if method in ("client_secret_basic", "client_secret_post", "client_secret_jwt"):
            meta["client_secret"] = SECRET
        if backchannel_logout:
            meta["backchannel_logout_uri"] = (
                backchannel_logout
                if isinstance(backchannel_logout, str)
                else f"{auth_url}/backchannel-logout/{client_id}"
            )
            meta["backchannel_logout_session_required"] = session_required
        meta.update(metadata)
        meta = {k: v for k, v in meta.items() if v is not None}
        settings: dict[str, Any] = {"interval": device_interval}
        if device_code_ttl is not None:
            settings["deviceCodeTtl"] = device_code_ttl
        if amr is not None:
            settings["amr"] = amr
        response = requests.post(
            self.issuer + "/__test/clients",
            json={"metadata": meta, "settings": settings},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        self.added_clients[client_id] = method
        return meta

    # -- RP-initiated and back-channel logout ---------------------------------------------

    def end_session(self, session: requests.Session, url: str, *, confirm: bool = True) -> str:
        """Take the browser whose provider cookies are in ``session`` through the provider's
        end_session endpoint at ``url`` (as the app built it); return where the provider
        finally sends it: the post_logout_redirect_uri (with state), or the provider's own
        success page (``{issuer}/session/end/success``, with ``?client_id=`` when the
        provider kept its session).

        The confirmation page is answered "yes" (logout=yes: the whole provider session
        ends; back-channel logout to every client of it), or with ``confirm=False`` "no":
        the provider keeps its session but still ends the requesting client's part of it
        (revokes that client's grant; back-channel logout to that client only). A browser
        without a provider session gets no confirmation page (an auto-submitted logout=yes
        form instead). An error page fails the test."""
        for _ in range(10):
            if not url.startswith(self.issuer + "/"):
                return url
            response = session.get(url, allow_redirects=False, timeout=10)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["Location"])
                continue
            if response.status_code != 200:
                raise AssertionError(f"provider answered {response.status_code}: {response.text}")
            forms = parse_forms(response.text)
            if not forms:  # the success page
                return url
            form = forms[0]
            fields = dict(form.fields)
            if form.id == "op.logoutForm" and confirm:
                fields["logout"] = "yes"
            url = urljoin(url, form.action)
            response = session.post(url, data=fields, allow_redirects=False, timeout=10)
            if response.status_code not in (302, 303):
                raise AssertionError(f"provider answered {response.status_code}: {response.text}")
            url = urljoin(url, response.headers["Location"])
        raise AssertionError("too many steps at the provider's end_session endpoint")

    def end_op_session(self, session: requests.Session) -> None:
        """End the provider session of the browser whose cookies are in ``session``, with no
        client involved (end_session without id_token_hint, confirmed): every client of that
        session with a backchannel_logout_uri gets a logout token before this returns."""
        url = self.end_session(session, self.discovery()["end_session_endpoint"])
        assert url.startswith(self.issuer + "/session/end/success"), url

    def backchannel_deliveries(self, client_id: str | None = None) -> list[dict[str, Any]]:
        """The back-channel logout requests the provider has made so far, oldest first (of
        ``client_id`` only, if given): dicts with client_id, url, sub, sid, logout_token,
        status (the RP's HTTP status, or None when the request failed), error (None, or
        why it failed: a network error, or a status other than 200 and 204), ok (True or
        False once the provider settled it, None before)."""
        found = requests.get(self.issuer + "/__test/backchannel", timeout=10).json()
        return [d for d in found if client_id is None or d["client_id"] == client_id]

    def wait_backchannel(
        self, client_id: str, count: int = 1, timeout: float = 5.0
    ) -> list[dict[str, Any]]:
        """Wait until ``client_id`` has ``count`` settled back-channel deliveries; return them
        all. (The provider makes them before it answers the logout confirmation, so they are
        normally there by the time ``end_session`` returns.)"""
        deadline = time.monotonic() + timeout
        while True:
            found = self.backchannel_deliveries(client_id)
            if sum(d["ok"] is not None for d in found) >= count:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} back-channel deliveries to {client_id}")
            time.sleep(0.05)

    # -- device authorization grant (RFC 8628) -------------------------------------------

    def _client_auth(self, client_id: str, data: dict[str, str]) -> Any:
        if self._method(client_id) == "none":
            data["client_id"] = client_id
            return None
        return (client_id, SECRET)

    def device_authorization(
        self, client_id: str = "op-device", scope: str = "openid email profile", **params: str
    ) -> dict[str, Any]:
        """Start a device flow as ``client_id`` (client_secret_basic, or client_id in the form
        for public clients); return the provider's JSON (device_code, user_code,
        verification_uri, verification_uri_complete, expires_in, interval)."""
        data = {"scope": scope, **params}
        auth = self._client_auth(client_id, data)
        response = requests.post(
            self.discovery()["device_authorization_endpoint"], data=data, auth=auth, timeout=10
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def device_token(self, device_code: str, client_id: str = "op-device") -> requests.Response:
        """Poll the token endpoint once for ``device_code``; return the raw response."""
        data = {"grant_type": DEVICE_GRANT, "device_code": device_code}
        auth = self._client_auth(client_id, data)
        return requests.post(self.discovery()["token_endpoint"], data=data, auth=auth, timeout=10)

    def approve_device(
        self,
        user_code: str,
        account: str = "alice",
        *,
        approve: bool = True,
        session: requests.Session | None = None,
    ) -> None:
        """Approve (or, ``approve=False``, deny with the confirmation page's abort button)
        ``user_code`` in a browser (``session``, or a fresh one) as ``account``, through the
        provider's verification pages: GET /device?op_account=<account> (which sets the
        test-only op_account cookie that picks the account to log in), submit the code,
        confirm, and follow the interaction to the success page. ``account="deny"`` makes
        the login interaction answer access_denied instead. A browser that already has a
        provider session is not asked to log in again: that session's account approves."""
        browser = session if session is not None else requests.Session()
        url = f"{self.issuer}/device?" + urlencode({"op_account": account})
        response = browser.get(url, timeout=10)
        [form] = parse_forms(response.text)
        assert form.id == "op.deviceInputForm", response.text
        fields = {**form.fields, "user_code": user_code}
        response = browser.post(urljoin(response.url, form.action), data=fields, timeout=10)
        forms = parse_forms(response.text)
        if not forms or forms[0].id != "op.deviceConfirmForm":  # e.g. NotFoundError
            raise AssertionError(f"user_code {user_code}: {_page_error(response)}")
        fields = dict(forms[0].fields)
        if not approve:
            fields["abort"] = "yes"
        response = browser.post(urljoin(response.url, forms[0].action), data=fields, timeout=10)
        if approve and account != "deny":
            if 'id="op.deviceSuccess"' not in response.text:
                raise AssertionError(f"user_code {user_code}: {_page_error(response)}")
        elif "AbortedError" not in (error := _page_error(response)):
            raise AssertionError(f"user_code {user_code}: {error}")

    def expire_device_code(self, user_code: str) -> None:
        """Make the device code of ``user_code`` expire now: its polls then answer
        expired_token (for the 15 seconds, the provider's clock tolerance, that it keeps an
        expired code; invalid_grant after that) and its verification page ExpiredError."""
        response = requests.post(
            self.issuer + "/__test/device/expire", json={"user_code": user_code}, timeout=10
        )
        assert response.status_code == 200, response.text

    def device_polls(self, client_id: str | None = None) -> list[dict[str, Any]]:
        """The device_code token requests so far, oldest first (of ``client_id`` only, if
        given): dicts with client_id, at (epoch seconds, float) and answer ("tokens", or
        the error code: authorization_pending, slow_down, access_denied, expired_token…)."""
        found = requests.get(self.issuer + "/__test/device", timeout=10).json()
        return [p for p in found if client_id is None or p["client_id"] == client_id]

    def code_tokens(
        self,
        session: requests.Session,
        client_id: str = "op-basic",
        account: str = "alice",
        *,
        auth_url: str = APP_ORIGIN + "/auth",
        redirect_uri: str | None = None,
        scope: str = "openid email profile",
        resource: str | None = None,
        **params: str,
    ) -> dict[str, Any]:
        """Sign ``account`` in to ``client_id`` (client_secret_basic, client_secret_post or
        none) with the authorization code flow and PKCE, without the app: the browser is
        ``session`` (which keeps the provider session), the redirect URI
        ``{auth_url}/callback/<client_id>`` unless given; ``params`` add to the
        authorization request (nonce, prompt…), ``resource`` (RFC 8707) to both requests.
        Return the token endpoint's JSON."""
        verifier = secrets.token_urlsafe(32)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        redirect_uri = redirect_uri or f"{auth_url}/callback/{client_id}"
        state = secrets.token_urlsafe(16)
        extra = {"resource": resource} if resource else {}
        query = {
            "client_id": client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": scope,
            "state": state,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "login_hint": account,
            **extra,
            **params,
        }
        url = self.discovery()["authorization_endpoint"] + "?" + urlencode(query)
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(redirect_uri))
        answer = query_of(follow_to_app(session, url, origin))
        assert answer.get("state") == state and "code" in answer, answer
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            **extra,
        }
        method = self._method(client_id)
        auth = None
        if method == "client_secret_basic":
            auth = (client_id, SECRET)
        elif method == "client_secret_post":
            form.update(client_id=client_id, client_secret=SECRET)
        else:
            assert method == "none", f"code_tokens cannot authenticate {client_id} ({method})"
            form["client_id"] = client_id
        response = requests.post(
            self.discovery()["token_endpoint"], data=form, auth=auth, timeout=10
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    # -- other applications' view of the provider ------------------------------------------

    def introspection_requests(self, token: str) -> list[dict[str, Any]]:
        """The introspection requests that sent ``token`` so far, oldest first (from the
        app or ``introspect``): dicts with client_id, status (the provider's HTTP status)
        and error (its OAuth error code, or None)."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        found = requests.get(self.issuer + "/__test/introspection", timeout=10).json()
        return [
            {k: v for k, v in r.items() if k != "token_sha256"}
            for r in found
            if r["token_sha256"] == digest
        ]

    def introspect(self, token: str, client_id: str = "op-basic") -> dict[str, Any]:
        """The provider's RFC 7662 answer about ``token``, asked by ``client_id`` (which
        must authenticate with client_secret_basic: op-basic or op-cli)."""
        if client_id != CLI_CLIENT_ID:
            assert CLIENT_METHODS[client_id] == "client_secret_basic", client_id
        response = requests.post(
            self.discovery()["introspection_endpoint"],
            data={"token": token},
            auth=(client_id, SECRET),
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def revoke(self, token: str, hint: str = "refresh_token", client_id: str = "op-basic") -> None:
        """Revoke ``token`` at the provider (RFC 7009) as ``client_id`` (client_secret_basic);
        this provider then revokes every token of the same grant."""
        response = requests.post(
            self.discovery()["revocation_endpoint"],
            data={"token": token, "token_type_hint": hint},
            auth=(client_id, SECRET),
            timeout=10,
        )
        assert response.status_code == 200, response.text

    def cli_tokens(self, account: str = "alice", resource: str | None = None) -> dict[str, Any]:
        """Sign ``account`` in to op-cli (authorization code with PKCE, over plain HTTP);
        return the token endpoint's JSON. With ``resource`` (RFC 8707), both requests name
        it and the scope adds API_SCOPE: the access token is then a JWT for that API."""
        return self.code_tokens(
            requests.Session(),
            CLI_CLIENT_ID,
            account,
            redirect_uri=CLI_REDIRECT_URI,
            scope="openid email profile" + (f" {API_SCOPE}" if resource else ""),
            resource=resource,
        )


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _respond(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        fake.hits[parts.path] += 1
        request = FakeRequest(
            method, parts.path, parse_qs(parts.query), parse_qs(body), dict(self.headers)
        )
        fake.requests.append(request)
        route = fake.routes.get(parts.path)
        status, headers, payload = route(request) if route else (404, {}, {"error": "nope"})
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._respond("GET")

    def do_POST(self) -> None:
        self._respond("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeIdP

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing of a client that left before its answer (the app gave up waiting,
        as the read-timeout tests make it); report every other error as usual."""
        if isinstance(sys.exception(), BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


class FakeRequest:
    def __init__(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        form: dict[str, list[str]],
        headers: dict[str, str],
    ) -> None:
        self.method = method
        self.path = path
        self.query = {k: v[0] for k, v in query.items()}
        self.form = {k: v[0] for k, v in form.items()}
        self.headers = headers


Route = Callable[[FakeRequest], tuple[int, dict[str, str], Any]]


class FakeIdP:
    """A small OpenID Provider (or plain OAuth server) whose every answer the test sets.

    ``/authorize`` answers at once with a code (302, or the form_post fields as JSON),
    remembering the nonce; ``/token`` returns an ID token signed with ``sign_key`` whose
    claims are the defaults updated with ``claims``; ``/jwks`` serves ``jwks``.
    """

    def __init__(self, *, oidc: bool = True) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.hits: Counter[str] = Counter()
        self.requests: list[FakeRequest] = []
        self.client_id = "fake-client"
        self.sign_key: Any = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        self.jwks: list[dict[str, Any]] = [self.sign_key.as_dict(private=False)]
        self.header: dict[str, Any] = {}
        self.claims: dict[str, Any] = {}
        self.userinfo: dict[str, Any] | None = {
            "sub": "user-1",
            "email": "fay@example.com",
            "email_verified": True,
            "name": "Fay",
        }
        self.token_extra: dict[str, Any] = {}
        self.codes: dict[str, dict[str, str]] = {}
        #: The ``iss`` the authorization response carries (RFC 9207); default the issuer.
        self.iss_param: str | None = None
        self.discovery: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.issuer + "/authorize",
            "token_endpoint": self.issuer + "/token",
            "userinfo_endpoint": self.issuer + "/userinfo",
            "jwks_uri": self.issuer + "/jwks",
            "authorization_response_iss_parameter_supported": True,
        }
        self.oidc = oidc
        self.routes: dict[str, Route] = {
            "/.well-known/openid-configuration": lambda r: (200, {}, self.discovery),
            "/jwks": lambda r: (200, {}, {"keys": self.jwks}),
            "/authorize": self._authorize,
            "/token": self._token,
            "/userinfo": self._userinfo,
        }
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def provider_config(self, provider_id: str = "fake", **extra: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": provider_id,
            "type": "oidc",
            "name": "Fake",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "client_secret": SECRET,
        }
        entry.update(extra)
        return entry

    def _authorize(self, request: FakeRequest) -> tuple[int, dict[str, str], Any]:
        code = secrets.token_urlsafe(16)
        self.codes[code] = request.query
        answer = {"code": code, "iss": self.iss_param or self.issuer}
        if "state" in request.query:
            answer["state"] = request.query["state"]
        if request.query.get("response_mode") == "form_post":
            return 200, {}, {"action": request.query["redirect_uri"], "fields": answer}
        location = request.query["redirect_uri"] + "?" + urlencode(answer)
        return 302, {"Location": location}, b""

    def id_token(self, nonce: str | None) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "email": "fay@example.com",
            "email_verified": True,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        claims.update(self.claims)
        claims = {k: v for k, v in claims.items() if v is not None}
        header = {
            "alg": "RS256" if isinstance(self.sign_key, RSAKey) else "ES256",
            "kid": self.sign_key.kid,
            **self.header,
        }
        header = {k: v for k, v in header.items() if v is not None}
        return jwt.encode(header, claims, self.sign_key, algorithms=[header["alg"]])

    def _token(self, request: FakeRequest) -> tuple[int, dict[str, str], Any]:
        auth = self.codes.pop(request.form.get("code", ""), None)
        if auth is None:
            return 400, {}, {"error": "invalid_grant"}
        body: dict[str, Any] = {
            "access_token": "at-" + secrets.token_urlsafe(8),
            "token_type": "Bearer",
            "expires_in": 3600,
        }
        if self.oidc:
            body["id_token"] = self.id_token(auth.get("nonce"))
        body.update(self.token_extra)
        return 200, {}, body

    def _userinfo(self, request: FakeRequest) -> tuple[int, dict[str, str], Any]:
        if not request.headers.get("Authorization", "").startswith("Bearer at-"):
            return 401, {}, {"error": "invalid_token"}
        return (200, {}, self.userinfo) if self.userinfo is not None else (404, {}, {})


@contextmanager
def fake_idp(**kwargs: Any) -> Iterator[FakeIdP]:
    fake = FakeIdP(**kwargs)
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


class Browser:
    """One person's browser: the app through the Flask test client, providers over HTTP."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.idp = requests.Session()

    def csrf(self) -> str:
        return str(self.client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]

    def start(self, provider_id: str, *, callback_url: str | None = None, **query: str) -> Any:
        """POST signin/<id>; return the app's response (302 to the provider, or an error)."""
        form = {"csrfToken": self.csrf()}
        if callback_url:
            form["callbackUrl"] = callback_url
        suffix = "?" + urlencode(query) if query else ""
        return self.client.post(f"/auth/signin/{provider_id}{suffix}", data=form)

    def authorize(self, url: str) -> str:
        """Follow the provider's redirects until it sends the browser back to the app."""
        return follow_to_app(self.idp, url)

    def sign_in(self, provider_id: str, *, callback_url: str | None = None, **query: str) -> Any:
        """The whole flow; return the app's answer to the callback."""
        start = self.start(provider_id, callback_url=callback_url, **query)
        assert start.status_code == 302, start.status_code
        return self.client.get(self.authorize(start.headers["Location"]))


def follow_to_app(session: requests.Session, url: str, origin: str = APP_ORIGIN) -> str:
    """Follow a provider's redirects until it sends the browser to the app's ``origin``
    (e.g. a server's ``http://127.0.0.1:<port>``)."""
    for _ in range(10):
        if url.startswith(origin + "/"):
            return url
        response = session.get(url, allow_redirects=False, timeout=10)
        if response.status_code not in (302, 303):
            raise AssertionError(f"provider answered {response.status_code}: {response.text}")
        url = urljoin(url, response.headers["Location"])
    raise AssertionError("too many redirects at the provider")


class Form:
    """One HTML form: its id, method, action and the values of its input fields."""

    def __init__(self, attrs: Mapping[str, str | None]) -> None:
        self.id = attrs.get("id") or ""
        self.method = (attrs.get("method") or "get").lower()
        self.action = attrs.get("action") or ""
        self.fields: dict[str, str] = {}


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._open: Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self._open = Form(found)
            self.forms.append(self._open)
        elif tag == "input" and self._open is not None and found.get("name"):
            self._open.fields[str(found["name"])] = found.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


def _page_error(response: requests.Response) -> str:
    """The error a test OP page shows (its op.error paragraph), or the whole answer."""
    found = re.search(r'<p id="op\.error">(.*?)</p>', response.text, re.S)
    return found.group(1) if found else f"{response.status_code} {response.text}"


def parse_forms(html: str) -> list[Form]:
    """The forms of an HTML page (buttons are left out: add their name=value yourself)."""
    parser = _FormParser()
    parser.feed(html)
    return parser.forms


def _toml_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings, booleans and numbers are written alike in TOML


def write_providers_toml(path: Path, entries: list[Mapping[str, Any]]) -> Path:
    """Write ``[[providers]]`` tables, as an operator would, for AUTH_CONFIG."""
    lines = []
    for entry in entries:
        lines.append("[[providers]]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in entry.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def email_sign_in(client: FlaskClient, mailbox: Mailbox, email: str) -> None:
    """Sign ``client`` in by e-mail link (needs EMAIL_SERVER=mailbox): a verified owner."""
    actions = EmailActions(client)
    actions.request_link(email)
    response = actions.confirm(link_of(mailbox.last()))
    assert error_of(response) is None, response.headers.get("Location")


def query_of(url: str) -> Mapping[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def error_of(response: Any) -> str | None:
    """The error code an app response redirects to (``?error=CODE``), if any."""
    if response.status_code != 302:
        return None
    return query_of(response.headers["Location"]).get("error")
