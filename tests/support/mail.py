"""Mail fixtures: real SMTP servers on loopback (aiosmtpd), broken ones, and the outbox.

``mailbox`` is a plain SMTP server that keeps what it receives and can be told to answer
with an error; ``tls_mailboxes`` adds STARTTLS and implicit-TLS servers with a certificate
made for the test session. ``refusing_smtp`` and ``stalling_smtp`` are addresses where
nothing listens and where a server accepts connections but never speaks. ``email_app``
builds the app with e-mail sign-in pointed at ``mailbox``; ``outbox`` reads the
development outbox folder. ``EmailActions`` drives the flow over HTTP like a browser.
"""

from __future__ import annotations

import datetime
import email
import ipaddress
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from flask import Flask
from flask.testing import FlaskClient

from .servers import free_port

SMTP_USER = "mailer"
SMTP_PASSWORD = "s3cret pass/word"
LINK_RE = re.compile(r"https?://\S+/callback/\S+")
CODE_RE = re.compile(r"\b([A-Z2-9]{4}-[A-Z2-9]{4})\b")


def link_of(message: EmailMessage) -> str:
    """Return the sign-in link in a message's text part."""
    match = LINK_RE.search(text_of(message))
    assert match, text_of(message)
    return match[0]


def code_of(message: EmailMessage) -> str:
    """Return the one-time code in a message's text part, as printed (ABCD-2345)."""
    match = CODE_RE.search(text_of(message))
    assert match, text_of(message)
    return match[1]


def text_of(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    return str(body.get_content())


def html_of(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("html",))
    assert body is not None
    return str(body.get_content())


@dataclass
class Mailbox:
    """What an aiosmtpd server received; ``reply`` makes it refuse at RCPT or DATA."""

    host: str = "127.0.0.1"
    port: int = 0
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    rcpt_reply: str | None = None
    data_reply: str | None = None
    logins: list[str] = field(default_factory=list)
    #: The names clients gave in EHLO/HELO, one per delivered message.
    helo_names: list[str] = field(default_factory=list)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if self.rcpt_reply:
            return self.rcpt_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.data_reply:
            return self.data_reply
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.helo_names.append(session.host_name)
        self.messages.append(
            email.message_from_bytes(envelope.original_content, policy=policy.default)  # type: ignore[arg-type]
        )
        return "250 Message accepted"

    def authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode(),
            auth_data.password.decode(),
        ) == (SMTP_USER, SMTP_PASSWORD)
        if ok:
            self.logins.append(auth_data.login.decode())
        # handled=False: aiosmtpd answers a failure with 535 itself.
        return AuthResult(success=ok, handled=False)

    def reset(self) -> None:
        self.messages.clear()
        self.envelopes.clear()
        self.logins.clear()
        self.helo_names.clear()
        self.rcpt_reply = self.data_reply = None

    def last(self) -> EmailMessage:
        assert self.messages, "no message received"
        return self.messages[-1]

    def url(self, scheme: str = "smtp", *, login: bool = False) -> str:
        """Return this server's EMAIL_SERVER value, with the test credentials if asked."""
        auth = f"{SMTP_USER}:{quote(SMTP_PASSWORD, safe='')}@" if login else ""
        return f"{scheme}://{auth}{self.host}:{self.port}"


def _start(mailbox: Mailbox, **kwargs: Any) -> Controller:
    mailbox.port = free_port()
    controller = Controller(
        mailbox,
        hostname=mailbox.host,
        port=mailbox.port,
        authenticator=mailbox.authenticate,
        **kwargs,
    )
    controller.start()
    return controller


@pytest.fixture(scope="session")
def _smtp_server() -> Iterator[Mailbox]:
    box = Mailbox()
    # AUTH over plain text is accepted here only because the server is on loopback.
    controller = _start(box, auth_require_tls=False)
    yield box
    controller.stop()


@pytest.fixture
def mailbox(_smtp_server: Mailbox) -> Iterator[Mailbox]:
    """A real SMTP server on loopback, emptied for each test."""
    _smtp_server.reset()
    yield _smtp_server
    _smtp_server.reset()


@dataclass(frozen=True)
class TlsMailboxes:
    starttls: Mailbox
    smtps: Mailbox
    ca_file: str


@pytest.fixture(scope="session")
def tls_mailboxes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsMailboxes]:
    """SMTP servers with STARTTLS and with implicit TLS, their certificate's CA file."""
    import ssl

    folder = tmp_path_factory.mktemp("smtp-tls")
    cert_file, key_file = _self_signed_certificate(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    starttls, smtps = Mailbox(), Mailbox()
    controllers = [
        _start(starttls, tls_context=context, require_starttls=True),
        # aiosmtpd only counts STARTTLS as encryption; this whole connection is TLS.
        _start(smtps, ssl_context=context, auth_require_tls=False),
    ]
    yield TlsMailboxes(starttls, smtps, str(cert_file))
    for controller in controllers:
        controller.stop()


def _self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def refusing_smtp() -> str:
    """An SMTP URL where nothing listens (connection refused)."""
    return f"smtp://127.0.0.1:{free_port()}"


@pytest.fixture
def stalling_smtp() -> Iterator[str]:
    """An SMTP URL whose server accepts connections and then never says a word."""
    # The kernel completes the TCP handshake for queued connections; nobody ever calls
    # accept(), so the client connects and then waits for a greeting that never comes.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"smtp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def email_app(make_app: Callable[..., Flask], mailbox: Mailbox) -> Callable[..., Flask]:
    """Build the app with e-mail sign-in through ``mailbox``: ``email_app(**overrides)``."""

    def factory(**overrides: Any) -> Flask:
        config: dict[str, Any] = {"EMAIL_SERVER": mailbox.url(), "EMAIL_TIMEOUT": "5"}
        config.update(overrides)
        return make_app(**config)

    return factory


@dataclass
class Outbox:
    """The development outbox folder and the messages in it."""

    folder: Path

    def messages(self) -> list[EmailMessage]:
        return [
            email.message_from_bytes(path.read_bytes(), policy=policy.default)  # type: ignore[misc]
            for path in sorted(self.folder.glob("*.eml"))
        ]

    def last(self) -> EmailMessage:
        found = self.messages()
        assert found, f"no message in {self.folder}"
        return found[-1]

    def last_link(self) -> str:
        return link_of(self.last())


@pytest.fixture
def outbox(tmp_path: Path) -> Outbox:
    return Outbox(tmp_path / "outbox")


class EmailActions:
    """The e-mail sign-in steps a browser takes, over HTTP."""

    def __init__(self, client: FlaskClient, provider: str = "email") -> None:
        self.client = client
        self.provider = provider

    def csrf(self) -> str:
        return str(self.client.get("/auth/csrf").json["csrfToken"])  # type: ignore[index]

    def request_link(self, address: str, **form: str) -> Any:
        data = {"csrfToken": self.csrf(), "email": address, **form}
        return self.client.post(f"/auth/signin/{self.provider}", data=data)

    def open_link(self, link: str) -> Any:
        """GET the link as a mail client would (path and query only)."""
        parts = urlsplit(link)
        return self.client.get(f"{parts.path}?{parts.query}")

    def confirm(self, link: str) -> Any:
        """Open the link, then press the page's button (POST its form)."""
        page = self.open_link(link)
        assert page.status_code == 200, page.headers.get("Location")
        form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page.get_data(as_text=True)))
        return self.client.post(urlsplit(link).path, data=form)

    def post_link(self, link: str, csrf: str | None = None) -> Any:
        """POST the link's token directly, as the confirmation form does."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
        data = {"csrfToken": csrf or self.csrf(), **query}
        return self.client.post(urlsplit(link).path, data=data)

    def enter_code(self, code: str) -> Any:
        data = {"csrfToken": self.csrf(), "code": code}
        return self.client.post(f"/auth/callback/{self.provider}", data=data)

    def session_email(self) -> str | None:
        body = self.client.get("/auth/session").json
        return body["user"]["email"] if body else None
