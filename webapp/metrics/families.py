"""Every metric, declared once: its name, what it counts, its labels and their values.

Names follow Prometheus's conventions: ``auth_`` first (the facility's, beside whatever
the embedding application exports), ``_total`` for a counter, ``_seconds`` for a duration.
Each label's values are a fixed list or come from the configuration (the ``bounded``
helpers below): a value from a request would make a series per client.

In the production server (multiprocess mode) each worker writes its values to a file of its
own; a gauge there is summed over the workers alive (``livesum``).
"""

from __future__ import annotations

from collections.abc import Collection

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: This process's metrics (the exposition's source outside multiprocess mode): ours alone,
#: not prometheus-client's global registry, which an embedding application may fill too.
REGISTRY = CollectorRegistry(auto_describe=True)

#: A label value outside its list.
OTHER = "other"
#: The label value where an event names no provider.
NO_PROVIDER = "none"

# -- sign-ins, second factors, throttles --------------------------------------------------

SIGNINS = Counter(
    "auth_signins_total",
    "Sign-ins: sessions started (outcome success) and attempts refused (outcome failure, "
    "error: the error code answered).",
    ["provider", "method", "outcome", "error"],
    registry=REGISTRY,
)
SECOND_FACTOR = Counter(
    "auth_second_factor_total",
    "Second factors at sign-in: passed (factor totp, recovery or passkey), a wrong code "
    "(failure) or codes paused by their throttle (throttled).",
    ["factor", "outcome"],
    registry=REGISTRY,
)
THROTTLED = Counter(
    "auth_throttled_total",
    "Requests refused by a throttle, by the throttle's name.",
    ["throttle"],
    registry=REGISTRY,
)

# -- sessions and provider tokens ----------------------------------------------------------

SESSIONS_CREATED = Counter(
    "auth_sessions_created_total",
    "Sessions created (one per successful sign-in).",
    registry=REGISTRY,
)
SESSIONS_ENDED = Counter(
    "auth_sessions_ended_total",
    "Sessions ended, by why.",
    ["reason"],
    registry=REGISTRY,
)
TOKEN_REFRESHES = Counter(
    "auth_token_refreshes_total",
    "Provider access tokens refreshed (success), refused by the provider (refused: the "
    "tokens are forgotten) or not refreshed because it did not answer (unavailable).",
    ["provider", "outcome"],
    registry=REGISTRY,
)
TOKEN_REVOCATIONS = Counter(
    "auth_token_revocations_total",
    "Provider tokens revoked at their provider (success), or not (failed; unsupported: no "
    "revocation endpoint).",
    ["provider", "outcome"],
    registry=REGISTRY,
)

# -- outbound: identity providers and mail -------------------------------------------------

#: Seconds: a discovery document on loopback takes milliseconds, a stalled provider its
#: read timeout (10 s by default).
OUTBOUND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0)

PROVIDER_REQUESTS = Counter(
    "auth_provider_requests_total",
    "HTTP requests to identity providers, by provider, endpoint and outcome (ok: a 2xx "
    "answer; 4xx, 5xx, other: another answer; timeout, unreachable: none).",
    ["provider", "endpoint", "outcome"],
    registry=REGISTRY,
)
PROVIDER_REQUEST_SECONDS = Histogram(
    "auth_provider_request_duration_seconds",
    "Time from sending a request to an identity provider to its answer (or failure).",
    ["provider", "endpoint"],
    buckets=OUTBOUND_BUCKETS,
    registry=REGISTRY,
)
EMAILS = Counter(
    "auth_emails_total",
    "Messages handed to the mail transport (sent) or not (failed), by message.",
    ["message", "outcome"],
    registry=REGISTRY,
)
EMAIL_SECONDS = Histogram(
    "auth_email_send_duration_seconds",
    "Time the mail transport took to take a message (or to fail), by outcome.",
    ["outcome"],
    buckets=OUTBOUND_BUCKETS,
    registry=REGISTRY,
)

# -- requests and the database pool ---------------------------------------------------------

HTTP_REQUESTS = Counter(
    "auth_http_requests_total",
    "Requests answered, by route (the URL rule; unmatched: none), method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_REQUEST_SECONDS = Histogram(
    "auth_http_request_duration_seconds",
    "Time to answer a request (until its body is ready), by route and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
DB_POOL_IN_USE = Gauge(
    "auth_db_pool_in_use",
    "Database connections checked out of the pool now, summed over the workers alive.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DB_POOL_SIZE = Gauge(
    "auth_db_pool_size",
    "Connections the pool keeps (DB_POOL_SIZE; more may open under bursts, up to "
    "DB_MAX_OVERFLOW), summed over the workers alive.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DB_POOL_CHECKOUTS = Counter(
    "auth_db_pool_checkouts_total",
    "Connections taken from the database pool.",
    registry=REGISTRY,
)

#: Every metric's name, as the exposition writes it (a counter's with ``_total``).
NAMES = (
    "auth_signins_total",
    "auth_second_factor_total",
    "auth_throttled_total",
    "auth_sessions_created_total",
    "auth_sessions_ended_total",
    "auth_token_refreshes_total",
    "auth_token_revocations_total",
    "auth_provider_requests_total",
    "auth_provider_request_duration_seconds",
    "auth_emails_total",
    "auth_email_send_duration_seconds",
    "auth_http_requests_total",
    "auth_http_request_duration_seconds",
    "auth_db_pool_in_use",
    "auth_db_pool_size",
    "auth_db_pool_checkouts_total",
)


def bounded(value: object, allowed: Collection[str], *, missing: str = OTHER) -> str:
    """``value`` if it is one of ``allowed``, else ``missing`` for None and ``other``."""
    if value is None:
        return missing
    return value if isinstance(value, str) and value in allowed else OTHER
