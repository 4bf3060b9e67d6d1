"""The production server: granian (a Rust HTTP server) serving the WSGI app.

    ./scripts/serve                       # http://127.0.0.1:8000, one worker per core
    PORT=8101 WEB_CONCURRENCY=4 ./scripts/serve

Why granian: bench/RESULTS.md, "What was optimised, and where the time goes" (measured
against gunicorn's gthread, sync and gevent workers on the same app and machine).

Sizing: one worker process per core, since each runs Python on one core at a time (the
GIL); a few threads per worker (``WEB_THREADS``), so a worker keeps its core busy while a
request waits on PostgreSQL, SMTP or an identity provider. A request stalled on a provider
holds one thread, never the worker. Each thread needs at most one pooled database
connection, so ``DB_POOL_SIZE`` should be at least ``WEB_THREADS``, and keeps one more for
the hot reads (``webapp.storage.database.ReadConnections``): workers x (DB_POOL_SIZE +
DB_MAX_OVERFLOW + WEB_THREADS) must stay below PostgreSQL's ``max_connections`` (or the
pooler's client connections).

Environment: ``HOST`` (127.0.0.1) and ``PORT`` (8000) to listen on (a port another server
listens on already is refused at start-up); ``WEB_CONCURRENCY``
(workers, default the number of cores); ``WEB_THREADS`` (threads per worker, 4);
``PID_FILE`` (write the server's pid there); ``WSGI_APP`` (``webapp.wsgi:app``; an
embedding application's own ``module:app``, which calls ``create_app(hooks=…)``);
``MALLOC_ARENA_MAX`` (glibc's own: the most malloc arenas per process, 2 unless set). The
app's own settings (AUTH_URL, AUTH_SECRET, DATABASE_URL, AUTH_TRUST_HOST, ...) are read by
the app as always; its AUTH_LOG_FORMAT (``json``) also makes this server's own lines and
the access log JSON objects.

Memory: this process imports the app's libraries (``PRELOADED``) before it forks the
workers, which share them; each worker imports the app itself.

Metrics: the workers keep their counts in a fresh directory this process makes
(``metrics_directory``), which ``GET /metrics`` sums over the workers.

Signals: SIGTERM or SIGINT stop accepting connections and let requests in flight finish
(at most ``GRACEFUL_SECONDS``); SIGHUP replaces the workers one by one, each loading the
app's code anew (a new release of the app); after installing other versions of its
libraries, restart the server instead.
"""

from __future__ import annotations

import copy
import ctypes
import gc
import importlib
import importlib.util
import logging
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LOGGING_CONFIG, LogLevels
from granian.server import Server

#: Seconds a stopping worker has to finish the requests it holds: more than the longest
#: a request can wait on outside services (SMTP, provider and database timeouts).
GRACEFUL_SECONDS = 20
#: A client has this long to send a request's headers (a slow client cannot hold a
#: connection open for ever); an idle keep-alive connection is closed after it too.
HEADER_SECONDS = 10
#: The most a request's line and headers may take; the app bounds bodies
#: (MAX_CONTENT_LENGTH, 64 KiB).
HEADER_BYTES = 64 * 1024


#: glibc's mallopt() parameter for the most malloc arenas a process may have.
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int = 2) -> None:
    """At most ``arenas`` malloc arenas in the workers (forked from this process after it).

    glibc gives a thread that allocates while another holds the main arena an arena of its
    own, up to eight per core, and each keeps the memory freed into it; a worker's threads
    take turns at the GIL, and two arenas serve them as well: about 2 MB less per worker
    (bench/RESULTS.md). ``MALLOC_ARENA_MAX`` in the environment, read by glibc itself,
    wins. Nothing is done on a C library other than glibc.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(M_ARENA_MAX, arenas)


#: The libraries the served app imports, as the modules that bring in the rest of them
#: (tests/test_serving.py checks that nearly every library module the app loads is among
#: what these import, and that each is one the app imports itself).
PRELOADED = (
    "authlib.integrations.requests_client",
    "authlib.oauth2.rfc7636",
    "babel.dates",
    "babel.support",
    "cryptography.hazmat.primitives.ciphers.aead",
    "flask",
    "flask_babel",
    "flask_login",
    "flask_sqlalchemy",
    "flask_wtf.csrf",
    "joserfc.jwk",
    "prometheus_client",
    "psycopg",
    "pyotp",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.orm",
    "ua_parser",
)


def preload_libraries() -> None:
    """Import the app's libraries in this process, before it forks the workers, so that
    they share those modules' memory instead of each importing its own copy.

    After the account page, a worker's private memory went from 79 to 47 MB and its
    proportional share from 92 to 63 MB (bench/RESULTS.md has this run's); a new worker
    builds the app in about 0.13 s instead of 0.6. The app's own modules are left to each
    worker, so SIGHUP still brings in a new release of the app; a change of installed
    packages needs a restart.

    ``gc.freeze`` keeps the collector off these objects, which would otherwise write to
    (and so copy) the shared pages they lie on. Nothing is done where workers are not
    forked (multiprocessing's "spawn" or "forkserver"): they would import everything again.
    """
    if multiprocessing.get_start_method() != "fork":
        return
    for name in PRELOADED:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def logging_config(log_format: str = "text") -> dict[str, object]:
    """granian's logging, plus the app's access log (``webapp.telemetry.logs``) on stdout,
    one line per request with its request id (granian's own access log is off: it can
    neither carry the id the app gives a request nor redact a link's token). With
    ``log_format`` ``json`` (the app's AUTH_LOG_FORMAT), granian's lines and the access
    lines are JSON objects, as the app's are."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["webapp.access"] = {  # type: ignore[index]
        "handlers": ["access"],
        "level": "INFO",
        "propagate": False,
    }
    if log_format == "json":
        # granian's two formatters: its own lines' and the access log's.
        config["formatters"] = {"generic": {"()": json_lines}, "access": {"()": json_lines}}
    return config


def json_lines() -> logging.Formatter:
    """The app's JSON line formatter (webapp/telemetry/jsonlines.py), loaded from its file,
    which imports the standard library only: importing it as ``webapp.telemetry.jsonlines``
    would import the app's package in this process, and the workers forked from it would
    then keep this release's code after a SIGHUP. Each worker loads the file anew when it
    sets up its logging."""
    package = importlib.util.find_spec("webapp")  # finds the package without importing it
    assert package is not None and package.submodule_search_locations
    path = Path(package.submodule_search_locations[0]) / "telemetry" / "jsonlines.py"
    spec = importlib.util.spec_from_file_location("_webapp_jsonlines", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    formatter: logging.Formatter = module.JsonLines()
    return formatter


def server(log_format: str = "text") -> Server:  # type: ignore[type-arg]
    env = os.environ
    pid_file = env.get("PID_FILE")
    host, port = env.get("HOST", "127.0.0.1"), int(env.get("PORT", "8000"))
    refuse_a_taken_port(host, port)
    return Server(
        env.get("WSGI_APP", "webapp.wsgi:app"),
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=int(env.get("WEB_CONCURRENCY") or os.cpu_count() or 1),
        blocking_threads=int(env.get("WEB_THREADS", "4")),
        http=HTTPModes.http1,
        websockets=False,
        http1_settings=HTTP1Settings(
            header_read_timeout=HEADER_SECONDS * 1000, keep_alive=True, max_buffer_size=HEADER_BYTES
        ),
        log_level=LogLevels.info,
        log_dictconfig=logging_config(log_format),
        log_access=False,
        respawn_failed_workers=True,
        workers_kill_timeout=GRACEFUL_SECONDS,
        pid_file=Path(pid_file) if pid_file else None,
        working_dir=Path(__file__).resolve().parent.parent,
        reload=False,
    )


def refuse_a_taken_port(host: str, port: int) -> None:
    """Stop with a clear error if another server listens on ``host:port`` already.

    granian binds with SO_REUSEPORT, so a second server on the same port starts without
    an error and the kernel splits the connections between the two: after a restart that
    left the old server running, both versions of the app would answer. A bind without
    SO_REUSEPORT fails while any listener holds the port.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # Connections of an earlier server that are closing (TIME_WAIT) do not count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise SystemExit(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


#: The variable prometheus-client reads, once, when it is imported (webapp/metrics/).
METRICS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"


def metrics_directory() -> Path:
    """Make a new, empty directory for the workers' metrics and name it in
    ``PROMETHEUS_MULTIPROC_DIR`` (replacing any value given), before this process imports
    prometheus-client (``preload_libraries``) and forks the workers: prometheus-client,
    imported with it set, keeps each worker's values in files of its own there
    (multiprocess mode), and ``GET /metrics`` adds them up (webapp/metrics/exposition.py).

    New at each start, so that no count of an earlier run is added to this one's; private
    to this user (mode 0700), under ``TMPDIR`` (the system's temporary directory unless
    set); removed when the server stops. A worker that exits (a crash, SIGHUP) leaves its
    files: its counts stay in the totals, its gauges are dropped at the next scrape.
    """
    directory = Path(tempfile.mkdtemp(prefix="webapp-metrics-"))
    os.environ[METRICS_DIRECTORY] = str(directory)
    return directory


def check_app(target: str) -> str:
    """Build the app once, in a child process, before any worker starts: a settings mistake
    (no AUTH_SECRET, a bad DATABASE_URL) then stops the server with the one line that names
    it and status 1, instead of every worker crashing on it and being respawned. A child, so
    that this process imports none of the app's own modules (SIGHUP must load them anew).
    Returns the app's AUTH_LOG_FORMAT, which this server's own lines follow."""
    checked = subprocess.run(
        [sys.executable, __file__, "--check-app", target],
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
        stdout=subprocess.PIPE,
        text=True,
    )
    if checked.returncode != 0:
        raise SystemExit(checked.returncode)
    return (checked.stdout.split() or ["text"])[-1]


def _build_app(target: str) -> None:
    """``check_app``'s child: import ``module:attribute``; a ConfigError is one line. Prints
    the app's AUTH_LOG_FORMAT for the parent."""
    from webapp.settings import ConfigError
    from webapp.settings.model import EXTENSION_KEY

    # Its start-up lines are the workers' to write.
    logging.disable(logging.CRITICAL)
    # Where the workers import it from (granian's working_dir, the checkout).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    module, _, attribute = target.partition(":")
    try:
        app = getattr(importlib.import_module(module), attribute or "app")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    settings = getattr(app, "extensions", {}).get(EXTENSION_KEY)
    print(settings.log_format if settings else "text")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-app"]:
        _build_app(sys.argv[2])
        raise SystemExit(0)
    configured = server(check_app(os.environ.get("WSGI_APP", "webapp.wsgi:app")))
    metrics = metrics_directory()  # before anything imports prometheus-client
    limit_malloc_arenas()
    preload_libraries()
    try:
        configured.serve()
    finally:
        shutil.rmtree(metrics, ignore_errors=True)
