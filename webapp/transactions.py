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
from werkzeug.wrappers import Response

from webapp.extensions import db


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
    for action in g.pop("on_commit", ()):
        action()


def init_app(app: Flask) -> None:
    """Commit at the end of every request that wrote something."""

    @app.after_request
    def _commit(response: Response) -> Response:
        # A request that never used the ORM session (the hot session read) costs one check.
        if db.session.registry.has() and db.session().in_transaction():
            commit()
        elif "on_commit" in g:
            commit()
        return response
