"""The scrape endpoint, ``GET /metrics``, at the app's root like the health checks.

Registered only when AUTH_METRICS_TOKEN is set: otherwise the app answers ``/metrics`` as
any unknown path (404). With it, a request must send ``Authorization: Bearer <token>``,
compared in constant time (as SHA-256 digests, so not even the length shows); anything else
is 401 with ``WWW-Authenticate: Bearer``. No throttle counts these requests, no session or
bearer token is looked up, nothing is written, and the access log writes them at DEBUG
only, as it does the health checks. The answer is never cached.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from flask import Blueprint, Flask, abort, request
from werkzeug.wrappers import Response

from webapp import metrics
from webapp.metrics import exposition
from webapp.providers.base import Provider
from webapp.settings import Settings, current_settings

PATH = "/metrics"

bp = Blueprint("metrics", __name__)


@bp.get(PATH)
def scrape() -> Response:
    """Every metric in Prometheus's text format, to a request with ``Authorization: Bearer
    <AUTH_METRICS_TOKEN>``; 401 to any other."""
    token = current_settings().metrics_token
    if token is None:
        abort(404)
    if not _authorized(request.headers.get("Authorization", ""), token):
        refused = _answer(b"401 Unauthorized\n", 401, "text/plain; charset=utf-8")
        refused.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return refused
    return _answer(exposition.render(), 200, exposition.CONTENT_TYPE)


def _authorized(header: str, token: str) -> bool:
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(_digest(given.strip()), _digest(token))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


def _answer(body: bytes, status: int, content_type: str) -> Response:
    answer = Response(body, status=status, content_type=content_type)
    answer.headers["Cache-Control"] = "no-store"
    answer.headers["X-Content-Type-Options"] = "nosniff"
    return answer


def init_app(app: Flask, conf: Settings, providers: Mapping[str, Provider]) -> None:
    """With AUTH_METRICS_TOKEN set, count (``webapp.metrics``, naming ``providers``' kinds)
    and serve ``GET /metrics``."""
    metrics.init_app(app, conf, methods={pid: p.type for pid, p in providers.items()})
    if conf.metrics_token is not None:
        app.register_blueprint(bp)


def quiet_paths(conf: Settings) -> frozenset[str]:
    """The paths the access log writes at DEBUG: ``/metrics`` when it is served."""
    return frozenset({PATH}) if conf.metrics_token is not None else frozenset()
