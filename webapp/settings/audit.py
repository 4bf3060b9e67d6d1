"""The audit trail's settings and the security notices' switches.

A notice is on wherever mail can be delivered; one asked for where none can stops start-up
rather than being silently dropped.
"""

from __future__ import annotations

from typing import Any

from webapp.settings.model import ConfigError, Settings
from webapp.settings.parsers import parse_bool, parse_days
from webapp.settings.sources import Sources


def read_audit(sources: Sources, *, can_mail: bool) -> dict[str, Any]:
    """``can_mail``: EMAIL_SERVER is set, the application delivers mail itself, or the
    development outbox takes the mail."""

    def notice(name: str, field_name: str) -> bool:
        wanted = parse_bool(name, sources.get(name, field_name))
        if wanted and not can_mail:
            raise ConfigError(f"{name} needs EMAIL_SERVER: outside development no mail is sent")
        return can_mail if wanted is None else wanted

    return {
        "audit_retention": parse_days(
            "AUDIT_RETENTION",
            sources.get("AUDIT_RETENTION", "audit_retention"),
            Settings.audit_retention,
        ),
        "audit_failure_ip_limit": sources.rate("AUDIT_FAILURE_IP_LIMIT", "audit_failure_ip_limit"),
        "notice_new_device": notice("AUTH_NOTICE_NEW_DEVICE", "notice_new_device"),
        "notice_methods": notice("AUTH_NOTICE_METHODS", "notice_methods"),
        "notice_other_sessions": notice("AUTH_NOTICE_OTHER_SESSIONS", "notice_other_sessions"),
        "notice_account_deleted": notice("AUTH_NOTICE_ACCOUNT_DELETED", "notice_account_deleted"),
    }
