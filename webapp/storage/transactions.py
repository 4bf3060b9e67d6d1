"""The one rule for transactions: a request's writes are committed together when it ends.

Flows and views never commit. When a view has answered, ``_commit`` (an after_request
hook) commits the request's transaction, then runs what the flows queued with
``on_commit`` (signals, which must only tell of what is stored). An error handler discards
the transaction before it answers, so a failed flow leaves nothing behind; a refusal whose
writes must stand (a one-time code burnt by its last wrong try, a spent expired link) is
raised with ``keep=True`` and committed by its handler instead. A flow whose outcome
replaces the sign-in (a hook's redirect) discards with ``discard``. The record of a refusal
(``webapp.audit.trail``) is queued with ``write_regardless``: written with the request's
writes when they are committed, and on its own after they are discarded, so a failed
request still leaves its failure on record. ``commit`` is the one way to commit: the end of
a request, an error handler keeping a refusal's writes, and the ``flask auth`` commands
(their own boundary, per batch where they delete in batches).

Outside this rule, each by design its own short transaction on a connection of its own:
- the session read's rare UPDATE or DELETE (no BEGIN/COMMIT on the hot path:
  ``webapp.sessions.store``, through ``webapp.storage.database``);
- the throttles' counters, which must survive the failing attempt's rollback
  (``webapp.audit.throttles``: ``hit`` and ``release``);
- a device sign-in's poll, claimed before the provider is asked so that no transaction is
  held meanwhile (``webapp.flows.signin.device``);
- a provider token's refresh, whose rotated refresh token must outlive the request
  (``webapp.flows.provider_tokens``);
- the readiness check's ping (``webapp.web.health``) and the schema upgrade under its
  advisory lock (``webapp.storage.schema_upgrade``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Flask, g
from sqlalchemy.exc import DBAPIError
from werkzeug.wrappers import Response

from webapp.storage.db import db
from webapp.telemetry import logsafe

log = logging.getLogger(__name__)

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


def write_regardless(write: Callable[[], object]) -> None:
    """Run ``write`` (it writes in the request's session) when this request ends, whatever
    becomes of its other writes: with them if they are committed, on its own if they are
    discarded. A function, so it can decide then (``webapp.audit.trail`` counts a failure's row
    against its throttle in the same transaction as the row)."""
    g.setdefault("regardless", []).append(write)


def discard() -> None:
    """Roll back this request's writes and forget what was queued for after the commit;
    then write (and commit) what was queued with ``write_regardless``, and run what those
    writes queued for after their commit.

    A database error on that last write is logged and goes no further: the answer that
    follows a refusal matters more than the refusal's record.
    """
    g.pop("on_commit", None)
    db.session.rollback()
    if "regardless" not in g:
        return
    try:
        _write_regardless()
        db.session.commit()
    except DBAPIError as exc:
        g.pop("on_commit", None)
        db.session.rollback()
        log.warning("a refusal was not recorded: %s", logsafe.encode(exc.orig))
        return
    _run_queued()


def settle_refusal(*, keep: bool) -> None:
    """End a refused request's writes: committed when the refusal must keep them (``keep``:
    a code burnt by its last wrong try, a throttle's count made in the request), else
    discarded."""
    if keep:
        commit()
    else:
        discard()


def commit() -> None:
    """Commit this request's writes, then run what was queued for after the commit."""
    _write_regardless()
    db.session.commit()
    _run_queued()


def _write_regardless() -> None:
    for write in g.pop("regardless", ()):
        write()


def _run_queued() -> None:
    for action in g.pop("on_commit", ()):
        action()


def init_app(app: Flask) -> None:
    """Commit at the end of every request that wrote something."""

    @app.after_request
    def _commit(response: Response) -> Response:
        # A request that never used the ORM session (the hot session read) costs one check.
        wrote = db.session.registry.has() and db.session().in_transaction()
        if not wrote and "on_commit" not in g and "regardless" not in g:
            return response
        try:
            _write_regardless()
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
