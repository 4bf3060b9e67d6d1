"""Mail: composing messages from templates, and delivering them over SMTP or to an outbox.

Delivery uses the standard library's ``smtplib``: it does STARTTLS, implicit TLS, AUTH and
SMTPUTF8, and a sign-in mail is one short message sent synchronously, so a third-party
client would add a dependency without adding anything we use. Every network step is
bounded by ``EMAIL_TIMEOUT`` (it is the socket timeout: connect, TLS handshake, and each
reply), so a stalled server costs one request that long, never a hung worker.

With no ``EMAIL_SERVER``, development uses the outbox: each message becomes an ``.eml``
file in the instance folder (readable by any mail program) and its text is logged, so a
fresh clone can sign in by e-mail with no mail server.

An application that delivers mail its own way (an HTTP API, a queue) sets the mail
transport hook (``AuthHooks.send_mail``): every composed message goes there instead, as
Auth.js's ``sendVerificationRequest`` does, and before EMAIL_SERVER when both are there. It
is looked up at each message, so a hook registered after ``create_app`` counts too. Set at
start-up (``own_mail_transport``), it also stands in for EMAIL_SERVER: outside development
e-mail sign-in and the security notices need one or the other. Registered later, it turns
on nothing start-up left off.
"""

from __future__ import annotations

import logging
import os
import secrets
import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import jinja2

from webapp.core.clock import utcnow
from webapp.core.hooks import current_hooks
from webapp.i18n import current_language, gettext, install_template_gettext
from webapp.metrics.outbound import delivering
from webapp.settings import ConfigError, Settings, is_loopback_url

log = logging.getLogger(__name__)

#: The built-in message templates; ``EMAIL_TEMPLATES`` names a folder searched first.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "auth" / "email"
DEFAULT_PORTS = {"smtp": 587, "smtps": 465}


class DeliveryError(Exception):
    """The message was not handed over to the mail server; the text is for the log."""


class Transport(Protocol):
    """Something that delivers a composed message, or raises ``DeliveryError``."""

    def send(self, message: EmailMessage) -> None: ...

    def describe(self) -> str:
        """Where the messages go, for the start-up log; no user name or password."""
        ...


@dataclass(frozen=True)
class SmtpTransport:
    """Delivery to an SMTP server: ``smtp://`` (STARTTLS when offered) or ``smtps://``."""

    host: str
    port: int
    implicit_tls: bool
    username: str | None
    #: Left out of ``repr``: a transport that reaches a log or a traceback shows no secret.
    password: str | None = field(repr=False)
    timeout: float
    ca_file: str | None = None
    #: The name given in EHLO. Without one, smtplib asks DNS for this machine's FQDN on
    #: every message (hundreds of milliseconds where DNS is slow); the sender's domain is
    #: what receiving servers expect to see anyway.
    helo_name: str = "localhost"

    @cached_property
    def _tls_context(self) -> ssl.SSLContext:
        # Built once: loading the CA bundle costs milliseconds per message otherwise. And
        # only for a message that goes over TLS: the bundle's certificates, and the OpenSSL
        # code that reads them, are about 2.5 MB of each worker's memory that a server
        # offering no TLS (a relay on loopback) never needs.
        return ssl.create_default_context(cafile=self.ca_file)

    def describe(self) -> str:
        security = "implicit TLS" if self.implicit_tls else "STARTTLS when offered"
        return f"SMTP {self.host}:{self.port} ({security})"

    def send(self, message: EmailMessage) -> None:
        try:
            client = self._connect()
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryError(f"connecting to {self.host}:{self.port}: {exc!r}") from exc
        try:
            self._deliver(client, message)
        except (OSError, smtplib.SMTPException) as exc:
            client.close()
            raise DeliveryError(f"sending via {self.host}:{self.port}: {exc!r}") from exc
        try:
            client.quit()
        except (OSError, smtplib.SMTPException):
            # The server accepted the message; a slow or rude goodbye changes nothing.
            client.close()

    def _connect(self) -> smtplib.SMTP:
        if self.implicit_tls:
            return smtplib.SMTP_SSL(
                self.host,
                self.port,
                local_hostname=self.helo_name,
                timeout=self.timeout,
                context=self._tls_context,
            )
        return smtplib.SMTP(
            self.host, self.port, local_hostname=self.helo_name, timeout=self.timeout
        )

    def _deliver(self, client: smtplib.SMTP, message: EmailMessage) -> None:
        client.ehlo()
        encrypted = self.implicit_tls
        if not encrypted and client.has_extn("starttls"):
            client.starttls(context=self._tls_context)
            client.ehlo()
            encrypted = True
        if self.username is not None:
            # A password crosses the network in clear only to a server on this machine.
            if not encrypted and not is_loopback_url(f"smtp://{self.host}"):
                raise DeliveryError(
                    f"{self.host} offers no STARTTLS; refusing to send the SMTP password "
                    "unencrypted (use smtps:// or a server with STARTTLS)"
                )
            client.login(self.username, self.password or "")
        client.send_message(message)


@dataclass(frozen=True)
class OutboxTransport:
    """Development delivery: write each message as an ``.eml`` file with its plain text
    beside it (``.txt``), and log its text."""

    folder: Path

    def describe(self) -> str:
        return f"the development outbox, {self.folder}"

    def send(self, message: EmailMessage) -> None:
        path = self.folder / f"{utcnow():%Y%m%dT%H%M%S}-{secrets.token_hex(4)}.eml"
        body = message.get_body(preferencelist=("plain",))
        text = body.get_content() if body is not None else ""
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_private(path, message.as_bytes(policy=policy.SMTPUTF8))
            # The .eml's text is quoted-printable (a link copied from it would break): the
            # plain text beside it, as the person would read it.
            _write_private(path.with_suffix(".txt"), text.encode())
        except OSError as exc:
            raise DeliveryError(f"writing {path}: {exc!r}") from exc
        log.info("development outbox: message to %s saved as %s\n%s", message["To"], path, text)


def _write_private(path: Path, content: bytes) -> None:
    """Write a new file readable by its owner only: it holds a working sign-in link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)


def transport_from_settings(conf: Settings) -> Transport:
    """Return the transport ``EMAIL_SERVER`` names, or the outbox; raise ConfigError."""
    if conf.email_server is None:
        if not conf.is_development:
            raise ConfigError(
                "EMAIL_SERVER is required for e-mail sign-in outside development, e.g. "
                "smtps://user:password@mail.example.com (the outbox delivers to nobody)"
            )
        return OutboxTransport(Path(conf.email_outbox))
    # Messages below never quote the URL: it may carry the SMTP password.
    parts = urlsplit(conf.email_server)
    if parts.scheme not in DEFAULT_PORTS:
        raise ConfigError("EMAIL_SERVER must start with smtp:// (STARTTLS) or smtps:// (TLS)")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        raise ConfigError("EMAIL_SERVER has an invalid port") from None
    if not parts.hostname:
        raise ConfigError("EMAIL_SERVER needs a host, e.g. smtp://mail.example.com:587")
    if conf.email_ca_file is not None and not Path(conf.email_ca_file).is_file():
        raise ConfigError(f"EMAIL_CA_FILE: file not found: {conf.email_ca_file}")
    return SmtpTransport(
        host=parts.hostname,
        port=port,
        implicit_tls=parts.scheme == "smtps",
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        timeout=conf.email_timeout,
        ca_file=conf.email_ca_file,
        helo_name=parseaddr(conf.email_from)[1].rpartition("@")[2] or "localhost",
    )


#: The message whose subject is ``EMAIL_SUBJECT``; every other message's subject is its own
#: template, ``<name>.subject.txt`` (the security notices').
SIGNIN_MESSAGE = "signin"


class MessageTemplates:
    """Renders ``<name>.txt`` and ``<name>.html`` (HTML autoescaped) and the subject line,
    in the language of the request that sends them (``_``, ``ngettext`` and
    ``current_language`` work as in the pages)."""

    def __init__(self, *, subject: str | None, override_folder: str | None = None) -> None:
        folders = [str(BUILTIN_TEMPLATES)]
        if override_folder is not None:
            if not Path(override_folder).is_dir():
                raise ConfigError(f"EMAIL_TEMPLATES: folder not found: {override_folder}")
            folders.insert(0, override_folder)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(folders),
            autoescape=jinja2.select_autoescape(["html"], default_for_string=False),
            # A misspelt variable in an override must fail loudly, not send a blank link.
            undefined=jinja2.StrictUndefined,
            extensions=["jinja2.ext.i18n"],
        )
        # As the pages' environment has them (the same catalogue).
        install_template_gettext(self.env)
        self.env.globals["current_language"] = current_language
        try:
            self.subject = None if subject is None else self.env.from_string(subject)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"EMAIL_SUBJECT is not a valid template: {exc}") from None

    def render(self, name: str, context: Mapping[str, Any]) -> tuple[str, str, str]:
        """Return ``(subject, text, html)`` for template ``name``."""
        if name != SIGNIN_MESSAGE:
            template = self.env.get_template(f"{name}.subject.txt")
            subject = " ".join(template.render(context).split())
        elif self.subject is None:
            # The sign-in message's built-in subject, or the confirmation's it is.
            purpose = context.get("purpose")
            if purpose == "delete-account":
                subject = gettext("Confirm deleting your account at %(site)s", site=context["site"])
            elif purpose == "confirm":
                subject = gettext("Confirm it is you at %(site)s", site=context["site"])
            else:
                subject = gettext("Sign in to %(site)s", site=context["site"])
        else:
            # Header injection is impossible anyway (EmailMessage refuses newlines); this
            # keeps a subject template that spans lines readable.
            subject = " ".join(self.subject.render(context).split())
        text = self.env.get_template(f"{name}.txt").render(context)
        html = self.env.get_template(f"{name}.html").render(context)
        return subject, text, html


def compose(*, sender: str, to: str, subject: str, text: str, html: str) -> EmailMessage:
    """Return a multipart/alternative message (text first, HTML preferred by clients)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(utcnow())
    domain = parseaddr(sender)[1].rpartition("@")[2] or "localhost"
    message["Message-ID"] = make_msgid(domain=domain)  # a domain avoids a DNS lookup
    # RFC 3834: vacation responders and ticket systems must not answer this message.
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    return message


@dataclass(frozen=True)
class Mailer:
    """Renders a named message and hands it to the application's mail transport, if it set
    one, else to the transport the settings name (None: the application's transport stood
    in for EMAIL_SERVER at start-up)."""

    transport: Transport | None
    templates: MessageTemplates
    sender: str

    def send(self, *, to: str, template: str, context: Mapping[str, Any]) -> None:
        """Render ``template`` for ``to`` and deliver it; raise ``DeliveryError``."""
        subject, text, html = self.templates.render(template, context)
        message = compose(sender=self.sender, to=to, subject=subject, text=text, html=html)
        with delivering(template):  # counted and timed (webapp.metrics)
            self._deliver(message)

    def _deliver(self, message: EmailMessage) -> None:
        send_mail = current_hooks().send_mail
        if send_mail is None:
            if self.transport is None:
                raise DeliveryError(
                    "no mail transport: the application's was removed after start-up, "
                    "and EMAIL_SERVER is not set"
                )
            self.transport.send(message)
            return
        try:
            send_mail(message)
        except Exception as exc:
            # Whatever the application's code raises, the message did not go: the callers
            # answer and log it as they do an SMTP server's refusal.
            raise DeliveryError(f"the application's mail transport: {exc!r}") from exc


def mailer_from_settings(conf: Settings, *, own_mail_transport: bool) -> Mailer:
    """Build the mailer the settings describe; raise ConfigError at start-up, not later.

    ``own_mail_transport``: the application delivers mail itself (``AuthHooks.send_mail``
    was set at start-up). Then EMAIL_SERVER is not required outside development: without
    it, the mailer has no transport of ours. Set, it is checked all the same.
    """
    stands_in = own_mail_transport and conf.email_server is None and not conf.is_development
    return Mailer(
        transport=None if stands_in else transport_from_settings(conf),
        templates=MessageTemplates(
            subject=conf.email_subject, override_folder=conf.email_templates
        ),
        sender=conf.email_from,
    )


def log_delivery(conf: Settings, *, own_mail_transport: bool) -> None:
    """Log, once at start-up, how mail goes out: the application's transport, an SMTP
    server (its host and port, never its user or password), the development outbox, or
    nowhere. Call it after the mailers are built, which check EMAIL_SERVER."""
    if own_mail_transport:
        unused = " (EMAIL_SERVER is set, and unused)" if conf.email_server else ""
        log.info("mail: the application's transport%s", unused)
    elif conf.email_server is None and not conf.is_development:
        log.info("mail: none (no EMAIL_SERVER): e-mail sign-in and security notices are off")
    else:
        log.info("mail: %s", transport_from_settings(conf).describe())
