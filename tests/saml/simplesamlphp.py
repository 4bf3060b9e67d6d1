"""SimpleSAMLphp (Debian's ``simplesamlphp`` package, 1.19) as a real SAML 2.0 identity
provider on loopback, for tests/saml.

``SimpleSamlIdp.start`` writes a private configuration folder (``SIMPLESAMLPHP_CONFIG_DIR``
points PHP there; /etc/simplesamlphp is never read): ``config.php`` (the IdP on, its files
under the work folder, no network calls), ``authsources.php`` (``exampleauth:UserPass``
with ``USERS``), the hosted IdP's metadata with a signing key and certificate made for
this test session (openssl) and the document it serves signed by another key pair
(``metadata_signing_pair``, as a federation signs), and our service provider twice in
``saml20-sp-remote``: ``SP_ID`` at the test app's ``AUTH_URL``, and ``KEYED_SP_ID``,
whose key pair (made here too, ``sp_key_pair``) the IdP knows: it encrypts assertions to
it, and single logout is on both ways, signed and checked. Then it runs PHP's built-in
server on a free loopback port over the package's ``www`` folder until ``stop``.
``rotate_key`` gives the IdP a new signing key (its metadata follows at once).

``login`` plays the browser at the IdP: it follows the app's redirect (the AuthnRequest,
HTTP-Redirect binding), posts the user name and password to the login form, and returns
the auto-submitting form's ``SAMLResponse`` and ``RelayState`` (the HTTP-POST binding) for
the test to post to the app's callback, with the browser (its session at the IdP, for
single logout).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import requests

from ..support.servers import free_port, stop_process, wait_until_listening

#: Where Debian's package puts SimpleSAMLphp (its web root is ``www``).
INSTALL = Path("/usr/share/simplesamlphp")
PHP = "php"
#: The app's provider id of the IdP, and the app's AUTH_URL in the tests (tests/support/config).
SP_ID = "acme"
AUTH_URL = "http://localhost/auth"
SP_ENTITY_ID = f"{AUTH_URL}/saml/{SP_ID}/metadata"
ACS_URL = f"{AUTH_URL}/callback/{SP_ID}"
#: A second registration of the app, with our key pair (``sp_key_file``/``sp_cert_file``
#: from ``SimpleSamlIdp.sp_key_pair``) known to the IdP: it encrypts the assertion to our
#: certificate, and single logout both ways is on, signed each way and checked.
KEYED_SP_ID = "acme-keyed"
KEYED_SLO_URL = f"{AUTH_URL}/saml/{KEYED_SP_ID}/slo"
BINDING_POST = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"
BINDING_REDIRECT = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
#: The people of ``exampleauth:UserPass``: user name -> (password, attributes).
USERS: dict[str, tuple[str, dict[str, list[str]]]] = {
    "ann": (
        "ann-pass",
        {"uid": ["ann"], "mail": ["ann@acme.example"], "displayName": ["Ann Acme"]},
    ),
    "bob": (
        "bob-pass",
        {"uid": ["bob"], "mail": ["bob@elsewhere.example"], "displayName": ["Bob Else"]},
    ),
    "nomail": ("nomail-pass", {"uid": ["nomail"], "displayName": ["No Mail"]}),
    "eve": (
        "eve-pass",
        {"uid": ["eve"], "mail": ["eve@eu.acme.example"], "displayName": ["Eve Europe"]},
    ),
}


class SimpleSamlMissing(Exception):
    """PHP (with its XML extensions, php-xml) or Debian's simplesamlphp package is not
    installed."""


def _php_array(value: object) -> str:
    """``value`` (str, bool, int, list, dict) as a PHP literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(_php_array(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_php_array(k)} => {_php_array(v)}" for k, v in value.items())
        return "[" + ", ".join(pairs) + "]"
    raise TypeError(type(value))


@dataclass(frozen=True)
class LoginResult:
    """What the IdP's last page would post to the app's assertion consumer."""

    action: str
    saml_response: str
    relay_state: str | None
    #: The browser, with its session at the IdP (for single logout).
    browser: requests.Session


class _Form(HTMLParser):
    """The first form of a page: its action and its inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = found.get("action") or ""
        elif tag == "input" and found.get("name"):
            self.fields[str(found["name"])] = found.get("value") or ""


def form_of(html: str) -> _Form:
    parsed = _Form()
    parsed.feed(html)
    return parsed


class SimpleSamlIdp:
    """One SimpleSAMLphp IdP in its own work folder (see the module's docstring)."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which(PHP) is None or not (INSTALL / "www" / "saml2").is_dir():
            raise SimpleSamlMissing("php-cli and Debian's simplesamlphp package are needed")
        has_dom = subprocess.run([PHP, "-r", "exit(class_exists('DOMDocument') ? 0 : 1);"])
        if has_dom.returncode != 0:
            raise SimpleSamlMissing("SimpleSAMLphp needs PHP's DOM extension (php-xml)")
        self.workdir = workdir
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/"
        self.metadata_url = urljoin(self.base_url, "saml2/idp/metadata.php")
        self.entity_id = self.metadata_url
        self.process: subprocess.Popen[bytes] | None = None
        #: saml20-sp-remote's entries: entity ID -> its metadata there.
        self._service_providers: dict[str, dict[str, object]] = {}

    @property
    def config_dir(self) -> Path:
        return self.workdir / "config"

    def start(self) -> None:
        for sub in ("config", "metadata", "cert", "log", "data", "tmp", "sessions"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self._make_key()
        self._make_key("sp")
        self._make_key("metadata")
        self._write_config()
        log = (self.workdir / "log" / "php-server.log").open("ab")
        self.process = subprocess.Popen(
            [PHP, "-S", f"127.0.0.1:{self.port}", "-t", str(INSTALL / "www")],
            env={**os.environ, "SIMPLESAMLPHP_CONFIG_DIR": str(self.config_dir)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_until_listening(self.metadata_url, self.process)

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def metadata(self) -> str:
        """The IdP's metadata document, as it serves it."""
        answer = requests.get(self.metadata_url, timeout=10)
        answer.raise_for_status()
        return answer.text

    @property
    def signing_key_file(self) -> Path:
        """The IdP's own signing key (for tests that sign as the IdP would)."""
        return self.workdir / "cert" / "idp.key"

    @property
    def metadata_signing_pair(self) -> tuple[Path, Path]:
        """The key and certificate the IdP signs its metadata with (not its signing key)."""
        return self.workdir / "cert" / "metadata.key", self.workdir / "cert" / "metadata.crt"

    @property
    def sp_key_pair(self) -> tuple[Path, Path]:
        """The key and certificate of ``KEYED_SP_ID``, as the IdP knows them."""
        return self.workdir / "cert" / "sp.key", self.workdir / "cert" / "sp.crt"

    def login(self, redirect_url: str, username: str) -> LoginResult:
        """Follow ``redirect_url`` (the app's AuthnRequest) as a new browser, sign in as
        ``username``, and return the form the IdP would auto-submit to the app."""
        browser = requests.Session()
        page = browser.get(redirect_url, timeout=10)
        page.raise_for_status()
        login = form_of(page.text)
        assert login.action is not None, page.text[:2000]
        password = USERS[username][0]
        answer = browser.post(
            urljoin(page.url, login.action),
            data={**login.fields, "username": username, "password": password},
            timeout=10,
        )
        answer.raise_for_status()
        posted = form_of(answer.text)
        assert "SAMLResponse" in posted.fields, answer.text[:2000]
        return LoginResult(
            action=str(posted.action),
            saml_response=posted.fields["SAMLResponse"],
            relay_state=posted.fields.get("RelayState"),
            browser=browser,
        )

    def asks_for_password(self, redirect_url: str, browser: requests.Session) -> bool:
        """Whether ``browser``, sent to the IdP with ``redirect_url``, gets the login form
        (no session at the IdP) rather than a response straight away."""
        answer = browser.get(redirect_url, timeout=10)
        answer.raise_for_status()
        return "password" in form_of(answer.text).fields

    def rotate_key(self) -> None:
        """A new signing key and certificate for the IdP, in its configuration and so in
        the metadata it serves (the old one is gone from both)."""
        self._make_key()

    def _make_key(self, name: str = "idp") -> None:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN=simplesamlphp-test-{name}",
                "-keyout", str(self.workdir / "cert" / f"{name}.key"),
                "-out", str(self.workdir / "cert" / f"{name}.crt"),
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip

    def _write_config(self) -> None:
        work = self.workdir
        config = {
            "baseurlpath": self.base_url,
            "certdir": str(work / "cert") + "/",
            "loggingdir": str(work / "log") + "/",
            "datadir": str(work / "data") + "/",
            "tempdir": str(work / "tmp"),
            "metadatadir": str(work / "metadata") + "/",
            "secretsalt": "simplesamlphp-test-salt",
            "auth.adminpassword": "simplesamlphp-test-admin",
            "technicalcontact_email": "na@example.org",
            "admin.checkforupdates": False,
            "enable.saml20-idp": True,
            "module.enable": {"exampleauth": True, "core": True, "saml": True},
            "logging.handler": "file",
            "logging.logfile": "simplesamlphp.log",
            "store.type": "phpsession",
            "session.phpsession.savepath": str(work / "sessions"),
            "session.cookie.secure": False,
            "language.cookie.secure": False,
            "showerrors": True,
            "errorreporting": False,
            "production": False,
        }
        self._php_file(self.config_dir / "config.php", "config", config)
        users = {f"{name}:{password}": attributes for name, (password, attributes) in USERS.items()}
        self._php_file(
            self.config_dir / "authsources.php",
            "config",
            {"admin": ["core:AdminPassword"], "users": {0: "exampleauth:UserPass", **users}},
        )
        self._php_file(
            work / "metadata" / "saml20-idp-hosted.php",
            "metadata['__DYNAMIC:1__']",
            {
                "host": "__DEFAULT__",
                "privatekey": "idp.key",
                "certificate": "idp.crt",
                "auth": "users",
                # Its metadata signed, as a federation's is, by a key of its own.
                "metadata.sign.enable": True,
                "metadata.sign.privatekey": "metadata.key",
                "metadata.sign.certificate": "metadata.crt",
            },
        )
        self._service_providers[SP_ENTITY_ID] = self._service_provider(ACS_URL)
        self.register_service_provider(f"{AUTH_URL}/saml/{KEYED_SP_ID}/metadata", KEYED_SP_ID)

    def register_service_provider(self, entity_id: str, provider_id: str) -> None:
        """Make ``entity_id`` (an app's provider ``provider_id`` at that entity ID's
        AUTH_URL) known to the IdP as ``KEYED_SP_ID`` is: its key pair ``sp_key_pair``,
        assertions encrypted to it, single logout both ways. PHP reads the file at each
        request: it counts from the next one."""
        auth_url = entity_id.removesuffix(f"/saml/{provider_id}/metadata")
        self._service_providers[entity_id] = {
            **self._service_provider(f"{auth_url}/callback/{provider_id}"),
            "SingleLogoutService": [
                {"Binding": BINDING_REDIRECT, "Location": f"{auth_url}/saml/{provider_id}/slo"}
            ],
            "certificate": "sp.crt",
            "assertion.encryption": True,
            "sign.logout": True,
            "validate.logout": True,
        }
        (self.workdir / "metadata" / "saml20-sp-remote.php").write_text(
            "<?php\n"
            + "".join(
                f"$metadata[{_php_array(e)}] = {_php_array(m)};\n"
                for e, m in self._service_providers.items()
            )
        )

    @staticmethod
    def _service_provider(acs_url: str) -> dict[str, object]:
        return {
            "NameIDFormat": "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
            "simplesaml.nameidattribute": "uid",
            "attributes.NameFormat": "urn:oasis:names:tc:SAML:2.0:attrname-format:basic",
            "AssertionConsumerService": [{"Binding": BINDING_POST, "Location": acs_url}],
        }

    @staticmethod
    def _php_file(path: Path, variable: str, value: object) -> None:
        path.write_text(f"<?php\n${variable} = {_php_array(value)};\n")
