"""Database engine set-up: pool options per backend, and SQLite's pragmas."""

from __future__ import annotations

import time
import weakref
from collections import namedtuple
from collections.abc import Callable, Mapping
from typing import Any, cast

from blinker import Namespace
from flask import Flask
from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Delete,
    Engine,
    Executable,
    Select,
    TypeDecorator,
    delete,
    event,
    select,
)
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.orm import InstrumentedAttribute
from werkzeug.routing import IntegerConverter, Map

from webapp.storage import transactions
from webapp.storage.db import db

_signals = Namespace()
#: Sent with ``statement=`` for every statement run on a driver connection directly,
#: past SQLAlchemy's cursor events (see HotSelect); the SQL counter listens to both.
driver_statement = _signals.signal("driver-statement")


def engine_options(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 5,
    pre_ping: bool = False,
    transaction_pooler: bool = False,
) -> dict[str, Any]:
    """Return SQLAlchemy engine options for ``url``.

    The pool is per worker process: size it to the server's threads (``DB_POOL_SIZE``);
    HotSelect's connections (ReadConnections) come on top, at most one per thread.
    Connections are recycled after 30 minutes so that none outlives a server-side or
    firewall idle timeout; ``pre_ping`` (``DB_POOL_PRE_PING``) costs a round trip per use.
    ``transaction_pooler`` (DATABASE_POOLER=transaction): psycopg never prepares a
    statement, since the next transaction may run on a server connection that lacks it.
    """
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 15}}
    connect_args: dict[str, Any] = {"connect_timeout": 5}
    if transaction_pooler:
        connect_args["prepare_threshold"] = None
    return {
        "pool_pre_ping": pre_ping,
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        "pool_recycle": 1800,
        # Fail fast (503) instead of hanging a worker when the server is unreachable.
        "connect_args": connect_args,
    }


def autocommit_connection() -> Connection:
    """A connection of its own on which every statement commits at once: for what must not
    wait for, join or be rolled back with the request's transaction (``transactions``)."""
    return db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")


def write_now(*statements: Executable) -> None:
    """Run writes on their own, committed at once: one write in autocommit mode (no
    BEGIN/COMMIT round trips), several in one transaction of their own."""
    if len(statements) == 1:
        with autocommit_connection() as conn:
            conn.execute(statements[0])
        return
    with db.engine.begin() as conn:
        for statement in statements:
            conn.execute(statement)


def execute_counting(statement: Executable) -> int:
    """Run a DELETE or UPDATE in the current session; return how many rows it touched."""
    result = cast(CursorResult[Any], db.session.execute(statement))
    return int(result.rowcount)


#: Expired rows a request deletes as it adds one (``delete_at_most``): more than it adds,
#: so expired rows never pile up between cleanups; few, so the request stays cheap.
PRUNE_BATCH = 100


def delete_at_most(
    key: InstrumentedAttribute[Any], *where: ColumnElement[bool], limit: int
) -> Delete:
    """Return a DELETE of at most ``limit`` rows matching ``where``, picked by ``key`` (the
    primary key): a bounded cost, where a plain DELETE takes whatever has piled up."""
    picked = select(key).where(*where).limit(limit).scalar_subquery()
    return delete(key.class_).where(key.in_(picked))


def delete_in_batches(
    id_column: InstrumentedAttribute[int],
    *where: ColumnElement[bool],
    batch_size: int,
    each_batch: Callable[[int], None] | None = None,
) -> int:
    """Delete the rows matching ``where``, ``batch_size`` at a time, each batch its own short
    transaction (no long locks on a big table); return how many went.

    ``each_batch(count)`` runs in each batch's transaction after its DELETE (one that
    deleted nothing included): what it writes commits with the batch. For maintenance
    commands, which are their own transaction boundary.
    """
    total = 0
    while True:
        deleted = execute_counting(delete_at_most(id_column, *where, limit=batch_size))
        if each_batch is not None:
            each_batch(deleted)
        transactions.commit()
        total += deleted
        if deleted < batch_size:
            return total


class RowIdConverter(IntegerConverter):
    """``<id:name>`` in a route: a row id, a whole number that fits BIGINT.

    Werkzeug's ``int`` takes any length; a larger number reached PostgreSQL as a parameter
    it cannot bind and answered 500. Out of range, the route does not match: 404.
    """

    def __init__(self, url_map: Map) -> None:
        super().__init__(url_map, min=1, max=2**63 - 1)


def init_app(app: Flask) -> None:
    """Bind Flask-SQLAlchemy and make SQLite enforce foreign keys (ON DELETE CASCADE);
    register the ``id`` route converter for row ids."""
    app.url_map.converters["id"] = RowIdConverter
    db.init_app(app)
    with app.app_context():
        engine = db.engine
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling defers BEGIN until the first write, so a
    # SAVEPOINT issued first would start (and its RELEASE commit) a transaction of its
    # own. Take control: no implicit BEGIN from the driver, an explicit one from us.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # SQLite ignores foreign keys unless asked, per connection; WAL lets readers and the
    # single writer of the development server work at once.
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        # IMMEDIATE takes the write lock up front: a second writer waits (busy timeout)
        # instead of failing at once when two read-then-write transactions would deadlock.
        # Readers are not blocked (WAL), and the session hot path runs outside BEGIN.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class _Read:
    """A driver connection in autocommit mode, with the cursors HotSelect uses on it."""

    __slots__ = ("driver", "cursor", "_cursors", "opened", "close", "__weakref__")

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.cursor = driver.cursor()
        self._cursors = [self.cursor]
        self.opened = time.monotonic()
        # Closed when dropped too (an engine that goes without being disposed), as the
        # driver would otherwise warn that a connection was left open.
        self.close = weakref.finalize(self, driver.close)

    def cursors(self, count: int) -> list[Any]:
        """``count`` cursors on this connection (one per statement of a pipeline), kept."""
        while len(self._cursors) < count:
            self._cursors.append(self.driver.cursor())
        return self._cursors[:count]


class ReadConnections:
    """Connections of their own for HotSelect: opened through the engine's pool (its
    connect options and events apply) and detached from it, for ever in autocommit mode.

    Taking one from SQLAlchemy's pool and putting it back, with autocommit switched on and
    off around the statement, cost about a sixth of a session read's CPU in the server
    (bench/RESULTS.md); here taking and giving back are a list's pop and append, atomic
    under the GIL. There are at most as many as threads ran a hot select at the same
    moment (the server's threads), besides the pool's; idle ones are kept. They follow the
    pool's rules: opened again after its recycle time, pinged first when it pre-pings, and
    closed when the engine is disposed (as on a lost server).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._idle: list[_Read] = []
        self._recycle: float = engine.pool._recycle  # the pool's own settings
        self._pre_ping: bool = engine.pool._pre_ping
        self.closed = False

    def take(self) -> _Read:
        try:
            read = self._idle.pop()
        except IndexError:
            return self._open()
        if self._recycle >= 0 and time.monotonic() - read.opened > self._recycle:
            read.close()
            return self._open()
        if self._pre_ping and not self._ping(read):
            # As the pool does when a ping fails: the server went away, so the others go too.
            self.close_idle()
            return self._open()
        return read

    def give(self, read: _Read) -> None:
        self._idle.append(read)
        if self.closed:  # disposed meanwhile, perhaps while it was being appended
            self.close_idle()

    def close_idle(self) -> None:
        while True:
            try:
                self._idle.pop().close()
            except IndexError:
                return

    def _open(self) -> _Read:
        pooled = self._engine.raw_connection()
        driver = pooled.driver_connection
        driver.autocommit = True  # type: ignore[union-attr]
        pooled.detach()
        return _Read(driver)

    def _ping(self, read: _Read) -> bool:
        try:
            driver_statement.send(statement="SELECT 1")
            read.cursor.execute("SELECT 1")
            read.cursor.fetchone()
        except self._engine.dialect.loaded_dbapi.Error:
            read.close()
            return False
        return True


_read_connections_by_engine: weakref.WeakKeyDictionary[Engine, ReadConnections] = (
    weakref.WeakKeyDictionary()
)


def _read_connections(engine: Engine) -> ReadConnections:
    reads = _read_connections_by_engine.get(engine)
    if reads is None:
        reads = _read_connections_by_engine[engine] = ReadConnections(engine)
        if not event.contains(engine, "engine_disposed", _close_read_connections):
            event.listen(engine, "engine_disposed", _close_read_connections)
    return reads


def _close_read_connections(engine: Engine) -> None:
    """On ``engine.dispose()``: close the idle read connections, and each busy one as it
    comes back; the next hot select opens new ones."""
    reads = _read_connections_by_engine.pop(engine, None)
    if reads is not None:
        reads.closed = True
        reads.close_idle()


class HotSelect:
    """A fixed SELECT for hot paths: outside any transaction, at the least CPU per call.

    On psycopg the statement, compiled once, runs on a driver connection in autocommit mode
    (ReadConnections): no BEGIN/ROLLBACK round trips, and none of SQLAlchemy's execution
    layer, which the benchmark's profile showed costing more than the query itself.
    psycopg prepares it on each connection after a few runs, unless the engine's
    connections never prepare (behind a transaction pooler, ``engine_options``): the
    connection was opened by the engine's pool, with that setting. Result columns go
    through their TypeDecorator (UTC timestamps), so rows read as SQLAlchemy's would. Parameters
    are passed to the driver as given: use plain strings, numbers and aware datetimes.
    Values fixed in the statement (an ``IN`` list of constants) are expanded once.

    While the request's session has a transaction open, the statement runs in it instead:
    a page re-rendered after a change must see that change, not yet committed. On other
    databases (SQLite) the Core statement runs on an AUTOCOMMIT connection.
    """

    def __init__(self, statement: Select[*tuple[Any, ...]]) -> None:
        self.statement = statement
        columns = list(statement.selected_columns)
        self._row = namedtuple("HotRow", [c.key for c in columns])  # type: ignore[misc]
        self._processors: list[tuple[int, Callable[[Any, Any], Any]]] = [
            (i, c.type.process_result_value)
            for i, c in enumerate(columns)
            if isinstance(c.type, TypeDecorator)
        ]
        self._sql: dict[Engine, tuple[str, dict[str, Any]]] = {}

    def first(self, params: Mapping[str, Any]) -> Any | None:
        """Return the first row (a named tuple) or None."""
        rows = self._run(params, one=True)
        return rows[0] if rows else None

    def one(self, params: Mapping[str, Any]) -> Any:
        """Return the row of a statement that always yields one (of scalar subqueries)."""
        row = self.first(params)
        if row is None:
            raise LookupError("the statement yielded no row")
        return row

    def all(self, params: Mapping[str, Any]) -> list[Any]:
        """Return every row (named tuples)."""
        return self._run(params, one=False)

    def _compiled(self, engine: Engine) -> tuple[str, dict[str, Any]]:
        """The driver's SQL for ``engine`` and the values fixed in the statement."""
        found = self._sql.get(engine)
        if found is None:
            compiled = self.statement.compile(dialect=engine.dialect)
            free = {name: None for name, value in compiled.params.items() if value is None}
            expanded = compiled.construct_expanded_state(free)
            fixed = {k: v for k, v in expanded.parameters.items() if k not in free}
            found = self._sql[engine] = (expanded.statement, fixed)
        return found

    def _run(self, params: Mapping[str, Any], *, one: bool) -> list[Any]:
        engine = db.engine
        if _in_transaction():
            result = db.session.execute(self.statement, params)
            return [result.first()] if one else list(result.all())
        if engine.dialect.driver != "psycopg":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                result = conn.execute(self.statement, params)
                return [result.first()] if one else list(result.all())
        sql, fixed = self._compiled(engine)
        reads = _read_connections(engine)
        read = None
        try:
            read = reads.take()
            driver_statement.send(statement=sql)
            read.cursor.execute(sql, {**fixed, **params} if fixed else params)
            if one:
                found = read.cursor.fetchone()
                fetched = [] if found is None else [found]
            else:
                fetched = read.cursor.fetchall()
        except engine.dialect.loaded_dbapi.Error as exc:
            failed, read = read, None
            raise _driver_error(engine, failed, exc, sql, params) from exc
        finally:
            if read is not None:
                reads.give(read)
        return [self._converted(row, engine) for row in fetched]

    def _converted(self, found: Any, engine: Engine) -> Any:
        if not self._processors:
            return self._row(*found)
        values = list(found)
        for i, process in self._processors:
            values[i] = process(values[i], engine.dialect)
        return self._row(*values)


def read_together(*reads: tuple[HotSelect, Mapping[str, Any]]) -> list[list[Any]]:
    """Run several hot selects that do not depend on each other; return each one's rows.

    On psycopg outside a transaction they go in one round trip on one read connection (the
    driver's pipeline mode: every statement sent, then one sync), where one after another
    each waited for its answer. Elsewhere they run one after another, as ``HotSelect.all``.
    """
    engine = db.engine
    if len(reads) < 2 or _in_transaction() or engine.dialect.driver != "psycopg":
        return [hot.all(params) for hot, params in reads]
    batch = [(hot, *hot._compiled(engine), params) for hot, params in reads]
    connections = _read_connections(engine)
    read = None
    try:
        read = connections.take()
        cursors = read.cursors(len(batch))
        with read.driver.pipeline():
            for cursor, (_hot, sql, fixed, params) in zip(cursors, batch, strict=True):
                driver_statement.send(statement=sql)
                cursor.execute(sql, {**fixed, **params} if fixed else params)
        fetched = [cursor.fetchall() for cursor in cursors]
    except engine.dialect.loaded_dbapi.Error as exc:
        failed, read = read, None
        statements = ";\n".join(sql for _hot, sql, _fixed, _params in batch)
        raise _driver_error(engine, failed, exc, statements, {}) from exc
    finally:
        if read is not None:
            connections.give(read)
    return [
        [hot._converted(row, engine) for row in rows]
        for (hot, _sql, _fixed, _params), rows in zip(batch, fetched, strict=True)
    ]


def _in_transaction() -> bool:
    # Asked without making the request a Session it would not otherwise have (a new one
    # is built and torn down again: a twentieth of a session read).
    return db.session.registry.has() and db.session().in_transaction()


def _driver_error(
    engine: Engine, read: _Read | None, exc: Any, sql: str, params: Mapping[str, Any]
) -> StatementError:
    """A driver's error on a read connection, as SQLAlchemy raises it.

    As SQLAlchemy does: a dropped connection means the server went away, so the whole pool
    is replaced (its other connections are as dead; the read connections go with it), and
    the error arrives wrapped (OperationalError: the 503 handler), parameters hidden. The
    connection that failed is closed, never reused.
    """
    lost = read is not None and engine.dialect.is_disconnect(exc, read.driver, None)
    if read is not None:
        read.close()
    if lost:
        engine.dispose()
    wrapped: StatementError = DBAPIError.instance(
        sql,
        params,
        exc,
        engine.dialect.loaded_dbapi.Error,
        hide_parameters=True,
        connection_invalidated=lost,
        dialect=engine.dialect,
    )
    return wrapped
