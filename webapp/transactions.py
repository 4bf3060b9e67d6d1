"""The one rule for transactions: a request's writes are committed together when it ends.

Flows and views never commit. When a view has answered, ``_commit`` (an after_request
hook) commits the request's transaction, then runs what the flows queued with
``on_commit`` (signals, which must only tell of what is stored). An error handler discards
the transaction before it answers, so a failed flow leaves nothing behind; a refusal whose
writes must stand (a one-time code burnt by its last wrong try, a spent expired link) is
raised with ``keep=True`` and committed by its handler instead. A flow whose outcome
replaces the sign-in (a hook's redirect) discards with ``discard``.

Outside this rule, each by design its own short transaction: the session read's rare
UPDATE or DELETE (no BEGIN/COMMIT on the hot path, ``auth.sessions``), the rate limit
counters (they must survive the failing attempt's rollback, ``auth.ratelimit``) and a
provider token's refresh (a rotated refresh token must outlive the request,
``auth.flows.provider_tokens``).
The ``flask auth`` commands are their own boundary and commit per batch.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, g
from sqlalchemy.exc import DBAPIError
from werkzeug.wrappers import Response

from webapp.extensions import db

#: Headers of a view's answer that an answer replacing it after a failed commit keeps: set
#: before the commit by the hooks registered after it (webapp/ui/csp.py, the auth routes').
_KEPT_HEADERS = (
    "Content-Security-Policy",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Strict-Transport-Security",
    "Cache-Control",
    "Pragma",
    "Expires",
)


def on_commit(action: Callable[[], object]) -> None:
    """Run ``action`` once this request's writes are committed (not if they are discarded)."""
    g.setdefault("on_commit", []).append(action)


def discard() -> None:
    """Roll back this request's writes and forget what was queued for after the commit."""
    g.pop("on_commit", None)
    db.session.rollback()


def commit() -> None:
    """Commit this request's writes, then run what was queued for after the commit."""
    db.session.commit()
    _run_queued()


def _run_queued() -> None:
    for action in g.pop("on_commit", ()):
        action()


def init_app(app: Flask) -> None:
    """Commit at the end of every request that wrote something."""

    @app.after_request
    def _commit(response: Response) -> Response:
        # A request that never used the ORM session (the hot session read) costs one check.
        wrote = db.session.registry.has() and db.session().in_transaction()
        if not wrote and "on_commit" not in g:
            return response
        try:
            db.session.commit()
        except DBAPIError as exc:
            # The view's answer told of writes that are not stored: answer as the error's
            # own handler does (a 503 for a lost database). Raised from here, it would reach
            # only Flask's generic 500. The answer's cookies are dropped with it; the
            # headers the later-registered hooks already set (security, caching) are kept.
            failed = app.make_response(app.handle_user_exception(exc))
            for name in _KEPT_HEADERS:
                if name in response.headers:
                    failed.headers[name] = response.headers[name]
            return failed
        _run_queued()
        return response
