"""Identity providers for the OAuth tests: the real oidc-provider (Node) and a Python fake.

``NodeOP`` runs ``tests/op/server.mjs`` (the npm package oidc-provider) on a free loopback
port. ``FakeIdP`` is a tiny provider in a thread whose keys, ID token claims, userinfo and
extra API routes each test chooses, for the failures a real provider will not produce.
``Browser`` drives a sign-in through the app (Flask test client) and the provider (real
HTTP), following redirects by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import requests
from flask.testing import FlaskClient
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from .fixtures_smtp import EmailActions, Mailbox, link_of
from .helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
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


class NodeOP:
    """oidc-provider on loopback, with one client per token endpoint auth method (the app's
    providers, ``CLIENT_METHODS``) and ``op-cli``, another application's client."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.rsa_key = RSAKey.generate_key(2048, parameters={"kid": "rp-rsa"})
        self.ec_key = ECKey.generate_key("P-256", parameters={"kid": "rp-ec"})
        # The RSA key as PEM, the EC key as a JWK file: both formats get exercised.
        (workdir / "rp-rsa.pem").write_bytes(self.rsa_key.as_pem(private=True))
        (workdir / "rp-ec.jwk").write_text(json.dumps(self.ec_key.as_dict(private=True)))
        self.process: subprocess.Popen[str] | None = None
        self._discovery: dict[str, Any] | None = None

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
        if method in ("client_secret_basic", "client_secret_post", "client_secret_jwt"):
            meta["client_secret"] = SECRET
        if client_id == "op-rsa":
            meta["jwks"] = {"keys": [self.rsa_key.as_dict(private=False)]}
        if client_id == "op-ec":
            meta["jwks"] = {"keys": [self.ec_key.as_dict(private=False)]}
            meta["token_endpoint_auth_signing_alg"] = "ES256"
        return meta

    def provider_config(self, client_id: str, **extra: Any) -> dict[str, Any]:
        """The app's [[providers]] table for one of this provider's clients."""
        method = CLIENT_METHODS[client_id]
        entry: dict[str, Any] = {
            "id": client_id,
            "type": "oidc",
            "name": f"Test OP ({method})",
            "issuer": self.issuer,
            "client_id": client_id,
            "token_endpoint_auth_method": method,
        }
        if method.startswith("client_secret"):
            entry["client_secret"] = SECRET
        if client_id == "op-rsa":
            entry["client_private_key_file"] = str(self.workdir / "rp-rsa.pem")
        if client_id == "op-ec":
            entry["client_private_key_file"] = str(self.workdir / "rp-ec.jwk")
        entry.update(extra)
        return entry

    def start(self) -> None:
        methods = {**CLIENT_METHODS, CLI_CLIENT_ID: "client_secret_basic"}
        config = {
            "port": self.port,
            "clients": [self.client_metadata(c, m) for c, m in methods.items()],
            "accounts": ACCOUNTS,
            "api": {"resource": API_RESOURCE, "scope": API_SCOPE},
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
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def discovery(self) -> dict[str, Any]:
        """The provider's metadata (/.well-known/openid-configuration)."""
        if self._discovery is None:
            url = self.issuer + "/.well-known/openid-configuration"
            self._discovery = requests.get(url, timeout=10).json()
        return self._discovery

    def grant_count(self, client_id: str, grant_type: str) -> int:
        """How many token endpoint grants of this type the client has obtained so far."""
        counts = requests.get(self.issuer + "/__test/grants", timeout=10).json()
        return int(counts.get(f"{client_id} {grant_type}", 0))

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
        verifier = secrets.token_urlsafe(32)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        state = secrets.token_urlsafe(16)
        params = {
            "client_id": CLI_CLIENT_ID,
            "response_type": "code",
            "redirect_uri": CLI_REDIRECT_URI,
            "scope": "openid email profile" + (f" {API_SCOPE}" if resource else ""),
            "state": state,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "login_hint": account,
        }
        if resource:
            params["resource"] = resource
        url = self.discovery()["authorization_endpoint"] + "?" + urlencode(params)
        answer = query_of(follow_to_app(requests.Session(), url))
        assert answer.get("state") == state and "code" in answer, answer
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": CLI_REDIRECT_URI,
            "code_verifier": verifier,
        }
        if resource:
            form["resource"] = resource
        response = requests.post(
            self.discovery()["token_endpoint"],
            data=form,
            auth=(CLI_CLIENT_ID, SECRET),
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return dict(response.json())


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


def follow_to_app(session: requests.Session, url: str) -> str:
    """Follow a provider's redirects until it sends the browser to the app's origin."""
    for _ in range(10):
        if url.startswith(APP_ORIGIN + "/"):
            return url
        response = session.get(url, allow_redirects=False, timeout=10)
        if response.status_code not in (302, 303):
            raise AssertionError(f"provider answered {response.status_code}: {response.text}")
        url = urljoin(url, response.headers["Location"])
    raise AssertionError("too many redirects at the provider")


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
