"""Passkeys and two-step verification: where passkeys can work, the limits on wrong codes,
and how recent a proof of presence must be.

Browsers refuse passkeys for an IP address or for a domain that is not AUTH_URL's host or
a parent of it, so either is refused here, at start-up, rather than at the first ceremony.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from webapp.settings.core import is_ip_address
from webapp.settings.model import ConfigError, Settings
from webapp.settings.parsers import opt_str, parse_bool, parse_int
from webapp.settings.sources import Setting, Sources, declare

SETTINGS = declare(
    Setting(
        "AUTH_PASSKEYS",
        "passkeys",
        "Offer passkeys: the sign-in chooser's button, the account page's section, and a "
        "passkey as the second factor. Needs a domain name in `AUTH_URL`, not an IP address.",
        default="on in development, off in production",
    ),
    Setting(
        "AUTH_PASSKEY_RP_ID",
        "passkey_rp_id",
        "A parent domain of `AUTH_URL`'s host to register passkeys for (`example.com` for "
        "`https://login.example.com/auth`), so they also work on its other sites; checked at "
        "start-up.",
        default="`AUTH_URL`'s host",
    ),
    Setting(
        "AUTH_PASSKEY_IP_LIMIT",
        "passkey_ip_limit",
        "Passkey options, and passkey answers (each spends its challenge as a row), each "
        "counted per client address (IPv6: per /64) per window; past it `RateLimited`.",
        field="passkey_ip_limit",
    ),
    Setting(
        "AUTH_SECOND_FACTOR_LIMIT",
        "second_factor_user_limit",
        "Wrong second-factor codes per user per window (sign-in and confirmation together), "
        "`count/window`.",
        field="second_factor_user_limit",
    ),
    Setting(
        "AUTH_SECOND_FACTOR_IP_LIMIT",
        "second_factor_ip_limit",
        "Wrong second-factor codes per client address (IPv6: per /64) per window.",
        field="second_factor_ip_limit",
    ),
    Setting(
        "AUTH_REAUTH_MAX_AGE",
        "reauth_max_age",
        "Seconds a proof of presence (a sign-in, or a code or passkey on the confirmation "
        "page) counts as recent: for changing sign-in methods and second factors, signing "
        "out other devices, deleting the account, and `@recent_signin_required` views.",
        field="account_reauth_window",
    ),
)


def read_passkeys(sources: Sources, development: bool, auth_url: str) -> dict[str, Any]:
    get, rate = sources.readers(SETTINGS)
    passkeys = parse_bool("AUTH_PASSKEYS", get("AUTH_PASSKEYS"))
    rp_id = opt_str(get("AUTH_PASSKEY_RP_ID"))
    host = urlsplit(auth_url).hostname or ""
    if rp_id is not None:
        rp_id = rp_id.lower()
        if host != rp_id and not host.endswith("." + rp_id):
            raise ConfigError(
                f"AUTH_PASSKEY_RP_ID {rp_id!r} must be AUTH_URL's host {host!r} or a parent "
                "domain of it (browsers refuse any other)"
            )

    if passkeys and not development and rp_id is None and is_ip_address(host):
        raise ConfigError(
            f"AUTH_PASSKEYS needs a domain name: AUTH_URL's host {host!r} is an IP address, "
            "which browsers refuse for passkeys"
        )
    return {
        "passkeys": development if passkeys is None else passkeys,
        "passkey_rp_id": rp_id,
        "passkey_ip_limit": rate("AUTH_PASSKEY_IP_LIMIT"),
        "second_factor_user_limit": rate("AUTH_SECOND_FACTOR_LIMIT"),
        "second_factor_ip_limit": rate("AUTH_SECOND_FACTOR_IP_LIMIT"),
        "account_reauth_window": timedelta(
            seconds=parse_int(
                "AUTH_REAUTH_MAX_AGE",
                get("AUTH_REAUTH_MAX_AGE"),
                int(Settings.account_reauth_window.total_seconds()),
                1,
            )
        ),
    }
