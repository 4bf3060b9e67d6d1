"""Glewlwyd (Debian bookworm's ``glewlwyd`` package, 2.7.5) as a real OpenID Provider on
loopback, for the interop tests (tests/interop/test_glewlwyd.py).

``Glewlwyd.start`` writes tests/interop/glewlwyd/glewlwyd.conf (a template: port, database
and log file chosen at run time) into a work folder, creates its SQLite database from the
package's own schema, starts ``glewlwyd -c …`` on a free loopback port, waits until it
answers, and then configures it through its admin REST API as the admin web app would (the
admin is the package's seeded ``admin``/``password``): the scopes, a user backend for the
people, the fix to the client backend's data format, the OpenID Connect plugin (RS256, a
key made here per test session), alice and bob, and one client per token endpoint
authentication method (``CLIENT_METHODS``) plus the device flow clients
(``DEVICE_CLIENT_METHODS``). What it posts is in tests/interop/glewlwyd/seed.json.

Glewlwyd has no login pages here (its web app is not installed): a browser signs in through
its REST API, as that web app does. ``authorize`` plays the browser at the provider:
``POST /api/auth/`` (username and password; the session cookie goes into the
``requests.Session``), ``PUT /api/auth/grant/<client_id>`` (the consent), then the
authorization URL, whose first answer is always a redirect to ``login.html`` carrying the
URL to come back to (``callback_url``, the authorization request plus ``g_continue``).
``approve_device`` does the same for a user code, ``end_session`` for the RP-initiated
logout page (``login.html?prompt=end_session``), and ``end_provider_session`` for what that
page's "log out" button calls (``DELETE /api/<plugin>/session/<sid>``: the back-channel
logout tokens go out from a thread of Glewlwyd's, then ``DELETE /api/auth/``).

From the provider's side: ``introspect`` and ``revoke`` (RFC 7662, RFC 7009, as the token's
own client), ``rotate_key`` (a new signing key through the admin API, the old ones still
published), ``add_client`` (for an app served over real HTTP) and ``log`` (Glewlwyd's own
log, DEBUG).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import secrets
import shutil
import sqlite3
import string
import subprocess
import time
import uuid
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import requests
from flask.testing import FlaskClient
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from ..support.oauth import APP_ORIGIN, Browser, provider_table, query_of
from ..support.servers import free_port, stop_process

HERE = Path(__file__).resolve().parent / "glewlwyd"
#: What the set-up posts to the admin API (scopes, modules, the plugin, the people).
SEED: dict[str, Any] = json.loads((HERE / "seed.json").read_text())
#: Where Debian's package puts the binary and its database schema (SQLite). The schema is
#: dbconfig-common's copy (the one the package's own install uses); the documentation's
#: gzipped copy is the same statements with DROPs first (and /usr/share/doc may be pruned).
BINARY = "/usr/bin/glewlwyd"
SCHEMAS = (
    Path("/usr/share/dbconfig-common/data/glewlwyd/install/sqlite3"),
    Path("/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz"),
)
#: The admin the package's schema seeds (password "password").
ADMIN = ("admin", "password")
PLUGIN = "oidc"
SECRET = "gl-client-secret-" + "s" * 40
#: Client id -> token endpoint auth method (Glewlwyd 2.7.5 offers these five; also mTLS,
#: not tested). The provider id in the app equals the client id.
CLIENT_METHODS = {
    "gl-basic": "client_secret_basic",
    "gl-post": "client_secret_post",
    "gl-jwt": "client_secret_jwt",
    "gl-rsa": "private_key_jwt",
    "gl-public": "none",
}
#: Device flow clients (authorization types device_authorization and refresh_token).
DEVICE_CLIENT_METHODS = {
    "gl-device": "client_secret_basic",
    "gl-device-jwt": "client_secret_jwt",
    "gl-device-public": "none",
}
#: The people (a user backend of their own, "people"), by username: their passwords.
#: alice's address is verified (email_verified "1" in the backend), bob's is not ("0").
PASSWORDS = {user["username"]: user["password"] for user in SEED["users"]}
SCOPE = "openid email profile"
POST_LOGOUT_REDIRECT_URI = f"{APP_ORIGIN}/auth/signout/callback"
#: The resource server (RFC 8707) the app clients may name: their access tokens' aud.
API_RESOURCE = f"{APP_ORIGIN}/api"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class GlewlwydMissing(RuntimeError):
    """The glewlwyd binary or its schema is not installed."""


def read_schema() -> str:
    for path in SCHEMAS:
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = zlib.decompress(data, 16 + zlib.MAX_WBITS)
            return data.decode()
    raise GlewlwydMissing("the glewlwyd package's SQLite schema is not installed")


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (for reading; the app verifies)."""
    return dict(json.loads(_unb64(token.split(".")[1])))


def jwt_header(token: str) -> dict[str, Any]:
    return dict(json.loads(_unb64(token.split(".")[0])))


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class Glewlwyd:
    """One Glewlwyd process on a free loopback port, configured for the app's providers."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which(BINARY) is None:
            raise GlewlwydMissing(f"{BINARY} is not installed (Debian package glewlwyd)")
        self.workdir = workdir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base}/api/{PLUGIN}"
        self.log_file = workdir / "glewlwyd.log"
        self.process: subprocess.Popen[bytes] | None = None
        #: Signing keys, oldest first; the last one signs.
        self.signing_keys = [self._new_signing_key()]
        self.rsa_key = RSAKey.generate_key(2048, parameters={"kid": "gl-rp-rsa"})
        # A JWK file, so that the app's client assertions name the key (kid): Glewlwyd looks
        # a private_key_jwt client's key up by kid in its jwks, and without one finds none
        # (unless the key is registered as PEM under the pubkey property instead).
        (workdir / "gl-rp-rsa.jwk").write_text(json.dumps(self.rsa_key.as_dict(private=True)))
        self.admin = requests.Session()
        self._discovery: dict[str, Any] | None = None
        #: Clients added at run time (``add_client``): client id -> auth method.
        self.added_clients: dict[str, str] = {}

    @staticmethod
    def _new_signing_key() -> RSAKey:
        kid = f"gl-{uuid.uuid4().hex[:8]}"
        return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})

    @property
    def kid(self) -> str:
        """The kid of the key Glewlwyd signs with now."""
        return str(self.signing_keys[-1].kid)

    # -- the process -----------------------------------------------------------------------

    def start(self) -> None:
        database = self.workdir / "glewlwyd.sqlite3"
        with sqlite3.connect(database) as conn:
            conn.executescript(read_schema())
        conf = string.Template((HERE / "glewlwyd.conf").read_text()).substitute(
            port=self.port, database=database, log_file=self.log_file
        )
        conf_path = self.workdir / "glewlwyd.conf"
        conf_path.write_text(conf)
        output = (self.workdir / "glewlwyd.out").open("wb")
        self.process = subprocess.Popen(
            [BINARY, "-c", str(conf_path)], stdout=output, stderr=subprocess.STDOUT
        )
        output.close()
        try:
            self._wait_until_listening()
            self._configure()
        except BaseException:
            self.stop()
            raise

    def _wait_until_listening(self) -> None:
        assert self.process is not None
        for _ in range(200):
            if self.process.poll() is not None:
                output = (self.workdir / "glewlwyd.out").read_text(errors="replace")
                raise RuntimeError(f"glewlwyd exited with {self.process.returncode}: {output}")
            try:
                requests.get(f"{self.base}/config", timeout=2)
                return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.05)
        raise RuntimeError(f"glewlwyd did not answer at {self.base}")

    def stop(self) -> None:
        stop_process(self.process)

    def log(self) -> str:
        """Glewlwyd's own log so far (log_level DEBUG)."""
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    # -- configuration through the admin API ------------------------------------------------

    def _admin(self, method: str, path: str, body: Any = None) -> requests.Response:
        response = self.admin.request(method, f"{self.base}/api/{path}", json=body, timeout=30)
        if response.status_code == 401:
            # The admin scope wants a password younger than its password_max_age (600 s by
            # default): a test late in a long run signs the admin in again.
            self._admin_login()
            response = self.admin.request(method, f"{self.base}/api/{path}", json=body, timeout=30)
        assert response.status_code == 200, (
            f"{method} /api/{path}: {response.status_code} {response.text}"
        )
        return response

    def _admin_login(self) -> None:
        username, password = ADMIN
        login = self.admin.post(
            f"{self.base}/api/auth/", json={"username": username, "password": password}, timeout=30
        )
        assert login.status_code == 200, f"admin login: {login.status_code} {login.text}"

    def _configure(self) -> None:
        self._admin_login()
        seed = SEED
        for scope in seed["scopes"]:
            self._admin("POST", "scope/", scope)
        self._admin("POST", "mod/user/", _public(seed["user_module"]))
        # The stock client backend's data format gains post_logout_redirect_uris; an
        # instance reads its parameters when enabled, hence the disable and enable.
        module = self._admin("GET", "mod/client/database").json()
        module["parameters"]["data-format"].update(_public(seed["client_module_data_format"]))
        self._admin("PUT", "mod/client/database", module)
        self._admin("PUT", "mod/client/database/disable")
        self._admin("PUT", "mod/client/database/enable")
        self._admin("POST", "mod/plugin/", self._plugin())
        for user in seed["users"]:
            self._admin("POST", "user/?source=people", user)
        for client_id, method in CLIENT_METHODS.items():
            self._admin("POST", "client/", self.client_metadata(client_id, method))
        for client_id, method in DEVICE_CLIENT_METHODS.items():
            self._admin("POST", "client/", self.device_client_metadata(client_id, method))

    def _plugin(self) -> dict[str, Any]:
        plugin = copy.deepcopy(SEED["plugin"])
        plugin["parameters"].update(
            {
                "iss": self.issuer,
                # Newest first: Glewlwyd 2.7.5 signs with the first RSA key of the set,
                # whatever default-kid says (which its documentation calls the signing key).
                "jwks-private": json.dumps(
                    {"keys": [key.as_dict(private=True) for key in reversed(self.signing_keys)]}
                ),
                "default-kid": self.kid,
            }
        )
        return dict(plugin)

    def rotate_key(self) -> str:
        """Sign with a new RSA key from now on (the old ones stay in the published JWKS);
        return its kid. The plugin reads its parameters when enabled: disable, enable."""
        self.signing_keys.append(self._new_signing_key())
        plugin = self._plugin()
        self._admin("PUT", f"mod/plugin/{PLUGIN}", plugin)
        self._admin("PUT", f"mod/plugin/{PLUGIN}/disable")
        self._admin("PUT", f"mod/plugin/{PLUGIN}/enable")
        return self.kid

    def client_metadata(
        self, client_id: str, method: str, *, auth_url: str = APP_ORIGIN + "/auth", **extra: Any
    ) -> dict[str, Any]:
        """The admin API's client object for an app client: code and refresh_token, the
        redirect URI ``{auth_url}/callback/<id>``, the post-logout redirect URI
        ``{auth_url}/signout/callback`` (under the plural name the plugin reads), the secret
        (client_secret_*), the public key (private_key_jwt); ``extra`` adds or overrides
        (None drops)."""
        meta: dict[str, Any] = {
            "client_id": client_id,
            "name": f"Webapp ({method})",
            "enabled": True,
            "confidential": method != "none",
            "redirect_uri": [f"{auth_url}/callback/{client_id}"],
            "post_logout_redirect_uris": [f"{auth_url}/signout/callback"],
            "authorization_type": ["code", "refresh_token"],
            "token_endpoint_auth_method": [method],
            "resource": [API_RESOURCE],
            "scope": [],
        }
        if method.startswith("client_secret"):
            meta["client_secret"] = SECRET
        if method == "private_key_jwt":
            meta["jwks"] = {"keys": [self.rsa_key.as_dict(private=False)]}
        meta.update(extra)
        return {k: v for k, v in meta.items() if v is not None}

    @staticmethod
    def device_client_metadata(client_id: str, method: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "client_id": client_id,
            "name": f"Webapp TV ({method})",
            "enabled": True,
            "confidential": method != "none",
            "authorization_type": ["device_authorization", "refresh_token"],
            "token_endpoint_auth_method": [method],
            "scope": [],
        }
        if method != "none":
            meta["client_secret"] = SECRET
        return meta

    def add_client(self, client_id: str, method: str = "client_secret_basic", **meta: Any) -> None:
        """Register (or replace) a client of the running provider (see client_metadata)."""
        if client_id in self.added_clients:
            self._admin("DELETE", f"client/{client_id}")
        self._admin("POST", "client/", self.client_metadata(client_id, method, **meta))
        self.added_clients[client_id] = method

    def _method(self, client_id: str) -> str:
        return {**CLIENT_METHODS, **DEVICE_CLIENT_METHODS, **self.added_clients}[client_id]

    def provider_config(
        self, client_id: str, *, method: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """The app's [[providers]] table for one of this provider's clients."""
        method = method or self._method(client_id)
        key_file = self.workdir / "gl-rp-rsa.jwk" if method == "private_key_jwt" else None
        return provider_table(
            client_id,
            name=f"Glewlwyd ({method})",
            issuer=self.issuer,
            method=method,
            secret=SECRET,
            key_file=key_file,
            extra=extra,
        )

    def discovery(self) -> dict[str, Any]:
        if self._discovery is None:
            url = self.issuer + "/.well-known/openid-configuration"
            self._discovery = dict(requests.get(url, timeout=10).json())
        return self._discovery

    def jwks(self) -> dict[str, Any]:
        return dict(requests.get(self.discovery()["jwks_uri"], timeout=10).json())

    # -- a browser at the provider ----------------------------------------------------------

    def login(self, session: requests.Session, username: str = "alice") -> None:
        """Sign ``username`` in at Glewlwyd in the browser ``session`` (its session cookie),
        as the login page does: POST /api/auth/ with the password."""
        answer = session.post(
            f"{self.base}/api/auth/",
            json={"username": username, "password": PASSWORDS[username]},
            timeout=10,
        )
        assert answer.status_code == 200, f"login {username}: {answer.status_code} {answer.text}"

    def grant(self, session: requests.Session, client_id: str, scope: str = SCOPE) -> None:
        """The consent: the signed-in user grants ``client_id`` these scopes (separated by
        spaces: with commas, as Glewlwyd's API documentation has it, the answer is 401)."""
        answer = session.put(
            f"{self.base}/api/auth/grant/{client_id}",
            json={"scope": " ".join(scope.split())},
            timeout=10,
        )
        assert answer.status_code == 200, f"grant {client_id}: {answer.status_code} {answer.text}"

    def authorize(
        self,
        session: requests.Session,
        url: str,
        username: str = "alice",
        *,
        origin: str = APP_ORIGIN,
    ) -> str:
        """Take the browser ``session`` through the authorization request at ``url`` (as the
        app built it): sign ``username`` in, grant the client what it asks, and follow
        Glewlwyd's redirects (its login page first, which names where to come back) until
        it sends the browser to ``origin``; return that URL (the app's callback)."""
        params = query_of(url)
        self.login(session, username)
        self.grant(session, params["client_id"], params.get("scope", SCOPE))
        return self.follow(session, url, origin=origin)

    def follow(self, session: requests.Session, url: str, *, origin: str = APP_ORIGIN) -> str:
        """Follow Glewlwyd's redirects from ``url`` until they leave for ``origin``; on its
        login page go on to the ``callback_url`` it names, as the page does once the user
        is signed in and has consented (adding ``g_continue``, as the page does)."""
        seen_login = None
        for _ in range(10):
            if url.startswith(origin + "/"):
                return url
            if url.startswith(f"{self.base}/login.html"):
                login = query_of(url)
                if "callback_url" not in login:
                    raise AssertionError(f"Glewlwyd's login page, nowhere to go: {url}")
                if url == seen_login:
                    raise AssertionError(f"Glewlwyd's login page again: {url}")
                seen_login = url
                # The page's "continue" button: back to callback_url with g_continue added.
                back = login["callback_url"]
                url = back + ("&" if "?" in back else "?") + "g_continue"
                continue
            response = session.get(url, allow_redirects=False, timeout=10)
            if response.status_code not in (302, 303):
                raise AssertionError(f"Glewlwyd answered {response.status_code}: {response.text}")
            url = urljoin(url, response.headers["Location"])
        raise AssertionError("too many redirects at Glewlwyd")

    def approve_device(self, user_code: str, username: str = "alice") -> None:
        """Approve ``user_code`` as ``username`` in a browser, as the verification page does:
        sign in; ``/device?code=…`` sends the browser to the login page naming the device's
        client and scopes, which the user consents to; then ``/device?code=…&g_continue``
        completes the approval (Glewlwyd's answer: ``login.html?prompt=deviceComplete``).
        Without the consent, Glewlwyd approves the code for ``openid`` alone."""
        browser = requests.Session()
        self.login(browser, username)
        url = f"{self.issuer}/device?" + urlencode({"code": user_code})
        first = browser.get(url, allow_redirects=False, timeout=10)
        assert first.status_code == 302, first.text
        login = query_of(first.headers["Location"])
        assert "client_id" in login, f"user_code {user_code}: {first.headers['Location']}"
        self.grant(browser, login["client_id"], login.get("scope", SCOPE))
        done = browser.get(url + "&g_continue", allow_redirects=False, timeout=10)
        assert done.status_code == 302, done.text
        prompt = query_of(done.headers["Location"]).get("prompt")
        assert prompt == "deviceComplete", f"user_code {user_code}: {done.headers['Location']}"

    def end_session(self, session: requests.Session, url: str) -> str | None:
        """Take the browser ``session`` through Glewlwyd's end_session endpoint at ``url`` (as
        the app built it) and its logout page's "log out": the provider session ends
        (back-channel logout to its clients). Return where the page then sends the browser:
        the post_logout_redirect_uri with the state, or None when Glewlwyd names none (an
        unregistered URI, or an ID token it does not take)."""
        first = session.get(url, allow_redirects=False, timeout=10)
        assert first.status_code == 302, first.text
        page = query_of(first.headers["Location"])
        assert first.headers["Location"].startswith(f"{self.base}/login.html"), page
        if page.get("prompt") != "end_session":
            return None
        self.end_provider_session(session, page["sid"])
        return page.get("callback_url")

    def end_provider_session(self, session: requests.Session, sid: str) -> None:
        """What the logout page's button calls for the provider session ``sid`` of the
        browser ``session``: DELETE /api/<plugin>/session/<sid> (Glewlwyd disables the
        tokens of that session and sends the back-channel logout tokens, from a thread of its
        own: they may arrive after this returns), then DELETE /api/auth/."""
        answer = session.delete(f"{self.issuer}/session/{sid}", timeout=10)
        assert answer.status_code == 200, f"end session {sid}: {answer.status_code} {answer.text}"
        answer = session.delete(f"{self.base}/api/auth/", timeout=10)
        assert answer.status_code == 200, answer.text

    # -- the provider's view of tokens ------------------------------------------------------

    def _client_auth(
        self, client_id: str, endpoint: str, data: dict[str, str]
    ) -> tuple[str, str] | None:
        method = self._method(client_id)
        if method == "client_secret_basic":
            return (client_id, SECRET)
        if method == "client_secret_post":
            data.update(client_id=client_id, client_secret=SECRET)
        elif method in ("client_secret_jwt", "private_key_jwt"):
            now = int(time.time())
            claims = {
                "iss": client_id,
                "sub": client_id,
                "aud": endpoint,
                "jti": secrets.token_urlsafe(16),
                "iat": now,
                "exp": now + 60,
            }
            key: Any = OctKey.import_key(SECRET) if method == "client_secret_jwt" else self.rsa_key
            header = {"alg": "HS256"} if method == "client_secret_jwt" else {"alg": "RS256"}
            if method == "private_key_jwt":
                header["kid"] = str(self.rsa_key.kid)
            data["client_assertion_type"] = ASSERTION_TYPE
            data["client_assertion"] = jwt.encode(header, claims, key, algorithms=[header["alg"]])
            data["client_id"] = client_id
        else:
            data["client_id"] = client_id
        return None

    def introspect(self, token: str, client_id: str | None = None) -> dict[str, Any]:
        """Glewlwyd's RFC 7662 answer about ``token``, asked by ``client_id`` (default: the
        access token's own ``client_id`` claim), authenticated by its method. A client
        authenticated with HTTP Basic sees only its own tokens (introspection-revocation-
        allow-target-client; one authenticated otherwise sees every client's, a Glewlwyd
        2.7.5 bug nothing here relies on); a public client cannot ask (401)."""
        client_id = client_id or str(jwt_claims(token)["client_id"])
        endpoint = self.discovery()["introspection_endpoint"]
        data = {"token": token}
        auth = self._client_auth(client_id, endpoint, data)
        response = requests.post(endpoint, data=data, auth=auth, timeout=10)
        assert response.status_code == 200, f"introspect: {response.status_code} {response.text}"
        return dict(response.json())

    def revoke(self, token: str, client_id: str, hint: str = "refresh_token") -> None:
        endpoint = self.discovery()["revocation_endpoint"]
        data = {"token": token, "token_type_hint": hint}
        auth = self._client_auth(client_id, endpoint, data)
        response = requests.post(endpoint, data=data, auth=auth, timeout=10)
        assert response.status_code == 200, f"revoke: {response.status_code} {response.text}"

    def code_tokens(
        self,
        session: requests.Session,
        client_id: str = "gl-basic",
        username: str = "alice",
        **params: str,
    ) -> dict[str, Any]:
        """Sign ``username`` in to ``client_id`` with the code flow and PKCE without the app
        (the browser is ``session``; ``params`` add to the authorization request); return
        the token endpoint's JSON."""
        verifier = secrets.token_urlsafe(32)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        redirect_uri = f"{APP_ORIGIN}/auth/callback/{client_id}"
        state = secrets.token_urlsafe(16)
        query = {
            "client_id": client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": SCOPE,
            "state": state,
            "nonce": secrets.token_urlsafe(16),
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            **params,
        }
        url = self.discovery()["authorization_endpoint"] + "?" + urlencode(query)
        answer = query_of(self.authorize(session, url, username))
        assert answer.get("state") == state and "code" in answer, answer
        endpoint = self.discovery()["token_endpoint"]
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        auth = self._client_auth(client_id, endpoint, form)
        response = requests.post(endpoint, data=form, auth=auth, timeout=10)
        assert response.status_code == 200, response.text
        return dict(response.json())


class GlewlwydBrowser(Browser):
    """One person's browser (``Browser``) whose provider is Glewlwyd: the authorization
    request signs ``username`` in there (the app's ``login_hint`` picks no one here)."""

    def __init__(self, client: FlaskClient, provider: Glewlwyd, username: str = "alice") -> None:
        super().__init__(client)
        self.provider = provider
        self.username = username

    def authorize(self, url: str) -> str:
        return self.provider.authorize(self.idp, url, self.username)


def _public(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A seed entry without its comments (keys starting with ``_``)."""
    return {k: v for k, v in entry.items() if not k.startswith("_")}
