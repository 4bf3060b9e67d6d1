"""Counts for Prometheus: what the facility does, summed over the server's worker processes
(docs/scaling.md, "Metrics"; served by ``webapp.web.metrics`` at ``GET /metrics``).

Every metric is declared once, in ``families``, with its labels; a label's values come from
the code or the configuration (provider ids, routes of the URL map, error codes of
``webapp.errors``, throttle names), never from a request, so that no client can add a time
series. What happens is counted where it is already told:

- ``events``: the audit trail's ``audit_event`` signal (sign-ins, second factors, sessions
  created and ended, provider tokens refreshed and revoked), and the throttles' refusals
  and the sessions found expired, which the trail does not record one by one;
- ``outbound``: each request to an identity provider (``webapp.oauth``) and each message
  handed to the mail transport (``webapp.mail``), with its duration;
- ``latency``: each request the app answers, by its route's rule, a WSGI layer;
- ``pool``: the database pool's connections in use, from SQLAlchemy's pool events.

``exposition`` writes the text format: from this process's registry, or, under the
production server (deploy/serve.py sets ``PROMETHEUS_MULTIPROC_DIR``), from the files every
worker writes its values to (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Flask

from webapp.metrics import events, latency, pool
from webapp.settings import Settings


def init_app(app: Flask, conf: Settings, *, methods: Mapping[str, str]) -> None:
    """Count for ``app`` when AUTH_METRICS_TOKEN is set (otherwise nothing is served, and
    nothing per request is measured): listen to the audit trail, watch the app's database
    pool and time its requests by route. ``methods``: each configured provider's id and
    kind (``email``, ``oauth``, ``credentials``, ``passkey``), the sign-ins' labels."""
    if conf.metrics_token is None:
        return
    events.init_app(app, methods)
    pool.init_app(app)
    latency.init_app(app)
