"""The audit trail's settings and the security notices' switches.

A notice is on wherever mail can be delivered; one asked for where none can stops start-up
rather than being silently dropped.
"""

from __future__ import annotations

from typing import Any

from webapp.settings.model import ConfigError, Settings
from webapp.settings.parsers import parse_bool, parse_days
from webapp.settings.sources import Setting, Sources, declare

#: The notices' default, in words: it follows whether mail can be delivered.
_WHERE_MAIL_GOES = (
    "on where mail can be delivered (`EMAIL_SERVER`, the application's mail transport set "
    "before start-up, or development's outbox); `true` where none can stops start-up"
)

SETTINGS = declare(
    Setting(
        "AUDIT_RETENTION",
        "audit_retention",
        "Days an audit event is kept (whole days, at least 1); `flask auth cleanup` deletes "
        "older ones.",
        field="audit_retention",
        unit="days",
    ),
    Setting(
        "AUDIT_FAILURE_IP_LIMIT",
        "audit_failure_ip_limit",
        "Refusals naming no user recorded one row each per client address (IPv6: per /64) "
        "per window, `count/window`; past it one `signin.throttled` row, the rest logged.",
        field="audit_failure_ip_limit",
    ),
    Setting(
        "AUTH_NOTICE_NEW_DEVICE",
        "notice_new_device",
        "Tell the person by e-mail of a sign-in from a device that has not signed in as them "
        "in the last 90 days.",
        default=_WHERE_MAIL_GOES,
    ),
    Setting(
        "AUTH_NOTICE_METHODS",
        "notice_methods",
        "Tell the person of a sign-in method (provider, password, passkey) added or removed, "
        "and of their e-mail address changed (at the old one).",
        default=_WHERE_MAIL_GOES,
    ),
    Setting(
        "AUTH_NOTICE_OTHER_SESSIONS",
        "notice_other_sessions",
        'Tell the person of "sign out everywhere else".',
        default=_WHERE_MAIL_GOES,
    ),
    Setting(
        "AUTH_NOTICE_ACCOUNT_DELETED",
        "notice_account_deleted",
        "Tell the address of a deleted account.",
        default=_WHERE_MAIL_GOES,
    ),
)


def read_audit(sources: Sources, *, can_mail: bool) -> dict[str, Any]:
    """``can_mail``: EMAIL_SERVER is set, the application delivers mail itself, or the
    development outbox takes the mail."""

    get, rate = sources.readers(SETTINGS)

    def notice(name: str) -> bool:
        wanted = parse_bool(name, get(name))
        if wanted and not can_mail:
            raise ConfigError(f"{name} needs EMAIL_SERVER: outside development no mail is sent")
        return can_mail if wanted is None else wanted

    return {
        "audit_retention": parse_days(
            "AUDIT_RETENTION",
            get("AUDIT_RETENTION"),
            Settings.audit_retention,
        ),
        "audit_failure_ip_limit": rate("AUDIT_FAILURE_IP_LIMIT"),
        "notice_new_device": notice("AUTH_NOTICE_NEW_DEVICE"),
        "notice_methods": notice("AUTH_NOTICE_METHODS"),
        "notice_other_sessions": notice("AUTH_NOTICE_OTHER_SESSIONS"),
        "notice_account_deleted": notice("AUTH_NOTICE_ACCOUNT_DELETED"),
    }
