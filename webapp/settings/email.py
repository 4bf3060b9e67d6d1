"""The e-mail settings: the mail server, the message, and how many a client may ask for.

Messages go to the application's own mail transport if it has one (``AuthHooks.send_mail``),
else to EMAIL_SERVER, else, in development, to the outbox. Outside development e-mail
sign-in needs EMAIL_SERVER or a transport the application set by start-up; with both,
EMAIL_SERVER is still checked, and unused. The security notices (``webapp.settings.audit``)
follow whether mail can be delivered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from webapp.settings.model import Settings
from webapp.settings.parsers import opt_str, parse_seconds
from webapp.settings.sources import Setting, Sources, declare

SETTINGS = declare(
    Setting(
        "EMAIL_SERVER",
        "email_server",
        "The mail server: `smtp://user:pass@host:port` (STARTTLS when the server offers it) or "
        "`smtps://…` (implicit TLS); user and password optional, percent-encoded. It turns "
        "e-mail sign-in (the provider `email`) on.",
        default="none: the application's own mail transport if it set one, else in "
        "development the outbox",
    ),
    Setting(
        "EMAIL_FROM",
        "email_from",
        "The sender, `addr` or `Name <addr>`.",
        default="`no-reply@<AUTH_URL host>`",
    ),
    Setting(
        "EMAIL_ADDRESS_LIMIT",
        "email_address_limit",
        "Messages per address requested from all browsers that never signed in as it, "
        "`count/window` (`s`, `m`, `h`).",
        field="email_address_limit",
    ),
    Setting(
        "EMAIL_ADDRESS_IP_LIMIT",
        "email_address_ip_limit",
        "Messages per address requested from one client address (or from one browser that "
        "signed in as it before).",
        field="email_address_ip_limit",
    ),
    Setting(
        "EMAIL_IP_LIMIT",
        "email_ip_limit",
        "E-mail sign-in requests per client address (IPv6: per /64) per window, whatever the "
        "addresses.",
        field="email_ip_limit",
    ),
    Setting(
        "EMAIL_TIMEOUT",
        "email_timeout",
        "Seconds to wait for the SMTP server's connection and for each of its replies.",
        field="email_timeout",
    ),
    Setting(
        "EMAIL_SUBJECT",
        "email_subject",
        "The sign-in message's subject, a Jinja template that sees `site` and `host`, used as "
        "written.",
        default='"Sign in to <site>" in the message\'s language',
    ),
    Setting(
        "EMAIL_TEMPLATES",
        "email_templates",
        "A folder whose templates (`signin.txt`, `signin.html`, the `notice_*` ones) replace "
        "the built-in ones, file by file.",
        default="none: the built-in templates",
    ),
    Setting(
        "EMAIL_OUTBOX",
        "email_outbox",
        "The development outbox: the folder messages are written to when no mail server is set.",
        default="`instance/outbox`",
    ),
    Setting(
        "EMAIL_CA_FILE",
        "email_ca_file",
        "A CA bundle to trust for the SMTP server's certificate (a private CA).",
        default="the system's",
    ),
)


def read_email(sources: Sources, auth_url: str, instance_path: Path) -> dict[str, Any]:
    get, rate = sources.readers(SETTINGS)
    return {
        "email_server": opt_str(get("EMAIL_SERVER")),
        "email_from": opt_str(get("EMAIL_FROM")) or f"no-reply@{urlsplit(auth_url).hostname}",
        "email_address_limit": rate("EMAIL_ADDRESS_LIMIT"),
        "email_address_ip_limit": rate("EMAIL_ADDRESS_IP_LIMIT"),
        "email_ip_limit": rate("EMAIL_IP_LIMIT"),
        "email_timeout": parse_seconds(
            "EMAIL_TIMEOUT", get("EMAIL_TIMEOUT"), Settings.email_timeout
        ),
        "email_subject": opt_str(get("EMAIL_SUBJECT")),
        "email_templates": opt_str(get("EMAIL_TEMPLATES")),
        "email_outbox": opt_str(get("EMAIL_OUTBOX")) or str(instance_path.resolve() / "outbox"),
        "email_ca_file": opt_str(get("EMAIL_CA_FILE")),
    }
