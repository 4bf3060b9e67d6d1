"""Counting what the audit trail tells (``audit_event``), and the two things it does not tell
one by one: a throttle's every refusal (the trail keeps the first of each key and window)
and a session found expired by the read that deletes it.

An event is counted once its row is committed, as the signal is sent (docs/audit.md): a
sign-in the hook refused, whose rows are rolled back, is no session created. Only the
events of ``SIGNIN_FAILURES`` besides ``signin`` count as failed sign-ins: the flows that
record a refusal of their own (an e-mail link refused, a wrong e-mail code) write no
``signin`` row for it. A throttle's refusal is counted in ``auth_throttled_total`` only.
Refusals past the trail's own allowance per client address are not recorded, hence not
counted here, but each is one ``audit-ip`` refusal there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, current_app, has_app_context

from webapp.core.hooks import audit_event
from webapp.errors import CODES
from webapp.metrics.families import (
    NO_PROVIDER,
    SECOND_FACTOR,
    SESSIONS_CREATED,
    SESSIONS_ENDED,
    SIGNINS,
    THROTTLED,
    TOKEN_REFRESHES,
    TOKEN_REVOCATIONS,
    bounded,
)

#: Where ``init_app`` keeps the configured providers' kinds (``app.extensions``).
METHODS_KEY = "webapp.metrics.methods"

#: Error codes a label may name: the error table's and the audit trail's own.
ERROR_CODES = frozenset(CODES) | {
    "RateLimited",
    "WrongCode",
    "RevocationFailed",
    "RevocationUnsupported",
}
#: Events other than ``signin`` whose failure is a failed sign-in, with the code counted:
#: an e-mail request that could not be sent (or named no address), a link or code refused,
#: a wrong e-mail code, a code burnt by too many wrong ones.
SIGNIN_FAILURES = frozenset({"email.requested", "email.refused", "code.failed", "code.lockout"})
#: The second factors a session's ``amr`` names, as the labels say them.
SECOND_FACTORS = {"otp": "totp", "rec": "recovery", "hwk": "passkey"}
#: Why sessions end: ``session.revoked``'s reasons, and ours.
END_REASONS = frozenset(
    {
        "signout",  # signing out, this browser's session
        "replaced",  # a new sign-in in the same browser (no fixation)
        "user",  # one ended on the account page
        "others",  # "sign out everywhere else"
        "backchannel",  # the provider's logout
        "limit",  # beyond AUTH_MAX_SESSIONS_PER_USER
        "operator",  # flask auth revoke, flask auth mfa reset
        "expired",  # found expired, or deleted by flask auth cleanup
        "deleted",  # the account was deleted
    }
)
#: The throttles (``audit.throttles`` keys' first part).
THROTTLES = frozenset(
    {
        *(
            f"{scope}-{key}"
            for scope in ("credentials", "email")
            for key in ("id-ip", "ip", "id", "browser")
        ),
        "second-factor-user",
        "second-factor-ip",
        "passkey-options-ip",
        "passkey-answer-ip",
        "oauth-ip",
        "device-ip",
        "bearer-ip",
        "audit-ip",
        "log-ip",
    }
)
#: token.refreshed's and token.revoked's failures, as outcomes.
TOKEN_OUTCOMES = {
    None: "success",
    "RefreshAccessTokenError": "refused",
    "RevocationFailed": "failed",
    "RevocationUnsupported": "unsupported",
}


def init_app(app: Flask, methods: Mapping[str, str]) -> None:
    """Count the audit trail's events (once per process), naming ``app``'s providers by
    ``methods`` (id to kind)."""
    app.extensions[METHODS_KEY] = dict(methods)
    audit_event.connect(count_event)  # a module's function: connected once, kept


def count_event(event_type: str, **row: Any) -> None:
    """Count one committed audit row (``audit_event``'s receiver)."""
    outcome = row.get("outcome")
    error = row.get("error_code")
    detail = row.get("detail") or {}
    if event_type == "signin":
        _signin(row.get("provider"), outcome, error)
        if outcome == "success":
            SESSIONS_CREATED.inc()
            if detail.get("replaced") is not None:
                SESSIONS_ENDED.labels("replaced").inc()
            factor = _second_factor(str(detail.get("amr") or "").split())
            if factor is not None:
                SECOND_FACTOR.labels(factor, "success").inc()
    elif event_type in SIGNIN_FAILURES and outcome == "failure":
        if detail.get("code") != "second-factor":
            _signin(row.get("provider"), outcome, error)
        elif event_type == "code.failed":
            SECOND_FACTOR.labels("code", "failure").inc()
        else:
            SECOND_FACTOR.labels("code", "throttled").inc()
    elif event_type == "signout":
        SESSIONS_ENDED.labels("signout").inc()
    elif event_type == "session.revoked":
        _sessions_ended(detail.get("reason"), detail)
    elif event_type == "account.deleted":
        _sessions_ended("deleted", detail)
    elif event_type == "token.refreshed":
        TOKEN_REFRESHES.labels(_provider(row.get("provider")), _token_outcome(error)).inc()
    elif event_type == "token.revoked":
        TOKEN_REVOCATIONS.labels(_provider(row.get("provider")), _token_outcome(error)).inc()


def throttled(throttle: str) -> None:
    """Count one refusal by ``throttle`` (every one, not only the first the trail keeps)."""
    THROTTLED.labels(bounded(throttle, THROTTLES)).inc()


def session_expired() -> None:
    """Count a session deleted by the read that found it expired (the trail keeps none)."""
    SESSIONS_ENDED.labels("expired").inc()


def token_refresh_unavailable(provider: str) -> None:
    """Count a refresh the provider did not answer (the trail keeps none: nothing changed)."""
    TOKEN_REFRESHES.labels(_provider(provider), "unavailable").inc()


def _signin(provider: object, outcome: object, error: object) -> None:
    success = outcome == "success"
    methods = _methods()
    named = bounded(provider, methods, missing=NO_PROVIDER)
    SIGNINS.labels(
        named,
        methods.get(named, NO_PROVIDER),
        "success" if success else "failure",
        "" if success else bounded(error, ERROR_CODES),
    ).inc()


def _second_factor(amr: list[str]) -> str | None:
    """The second factor a sign-in's ``amr`` shows ours passed: an authenticator app's or a
    recovery code, or a passkey after another first factor (a passkey is never both)."""
    for factor in ("otp", "rec"):
        if factor in amr:
            return SECOND_FACTORS[factor]
    if "hwk" in amr and amr[0] != "hwk":
        return SECOND_FACTORS["hwk"]
    return None


def _sessions_ended(reason: object, detail: Mapping[str, Any]) -> None:
    count = detail.get("sessions", 1)
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        SESSIONS_ENDED.labels(bounded(reason, END_REASONS)).inc(count)


def _token_outcome(error: object) -> str:
    return TOKEN_OUTCOMES.get(error if isinstance(error, str) else None, "failed")


def _provider(provider: object) -> str:
    """A provider id as a label: a configured one (a token event names an account's
    provider, which may have left the configuration since), else ``other``."""
    return bounded(provider, _methods(), missing=NO_PROVIDER)


def _methods() -> Mapping[str, str]:
    if not has_app_context():
        return {}
    methods: Mapping[str, str] = current_app.extensions.get(METHODS_KEY, {})
    return methods
