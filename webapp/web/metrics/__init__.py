"""``GET /metrics``: the counts of ``webapp.metrics`` for Prometheus, to a scraper that sends
``Authorization: Bearer <AUTH_METRICS_TOKEN>`` (``endpoint``); without that setting the route
is not there (404) and nothing per request is measured."""

from __future__ import annotations

from webapp.web.metrics.endpoint import PATH, init_app, quiet_paths

__all__ = ["PATH", "init_app", "quiet_paths"]
