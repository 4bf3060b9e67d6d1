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
from webapp.settings.sources import Sources


def read_email(sources: Sources, auth_url: str, instance_path: Path) -> dict[str, Any]:
    get, rate = sources.get, sources.rate
    return {
        "email_server": opt_str(get("EMAIL_SERVER", "email_server")),
        "email_from": opt_str(get("EMAIL_FROM", "email_from"))
        or f"no-reply@{urlsplit(auth_url).hostname}",
        "email_address_limit": rate("EMAIL_ADDRESS_LIMIT", "email_address_limit"),
        "email_address_ip_limit": rate("EMAIL_ADDRESS_IP_LIMIT", "email_address_ip_limit"),
        "email_ip_limit": rate("EMAIL_IP_LIMIT", "email_ip_limit"),
        "email_timeout": parse_seconds(
            "EMAIL_TIMEOUT", get("EMAIL_TIMEOUT", "email_timeout"), Settings.email_timeout
        ),
        "email_subject": opt_str(get("EMAIL_SUBJECT", "email_subject")),
        "email_templates": opt_str(get("EMAIL_TEMPLATES", "email_templates")),
        "email_outbox": opt_str(get("EMAIL_OUTBOX", "email_outbox"))
        or str(instance_path.resolve() / "outbox"),
        "email_ca_file": opt_str(get("EMAIL_CA_FILE", "email_ca_file")),
    }
