"""Broken services for the fault suite (tests/test_faults.py): a private PostgreSQL cluster
that can be restarted and stopped, an SMTP server that refuses, hangs up or stalls on
command, and HTTP endpoints that stall, answer 500 or answer garbage.

They stand in for services failing in ways no healthy test server (the shared PostgreSQL,
the ``mailbox`` fixture, the Node OP) can be made to fail. Each is a real server on
loopback: the app talks to it over TCP exactly as it would to the real thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import json
import os
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from .servers import free_port

# -- a PostgreSQL cluster of the test's own ------------------------------------------------

#: Every cluster this suite creates is named ``<prefix>_<creator pid>_<random>``, so a run
#: can tell its own clusters from another live run's and from those a killed run left.
CLUSTER_PREFIX = "webapp_faults"


def _run(command: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def _checked(command: list[str], timeout: float = 60) -> str:
    done = _run(command, timeout)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited with {done.returncode}: {done.stderr or done.stdout}"
        )
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def postgres_version() -> str:
    """The newest PostgreSQL major version Debian's tools manage here (``/etc/postgresql``)."""
    versions = sorted(
        (p.name for p in Path("/etc/postgresql").iterdir() if p.name.isdigit()), key=int
    )
    if not versions:
        raise RuntimeError("no PostgreSQL version in /etc/postgresql")
    return versions[-1]


def remove_stale_clusters() -> list[str]:
    """Drop the clusters of this suite whose creating process is gone (a killed run);
    return their names. Clusters of a live run are left alone."""
    listing = json.loads(_checked(["pg_lsclusters", "--json"]) or "[]")
    dropped = []
    for cluster in listing:
        name = str(cluster.get("cluster", ""))
        parts = name.removeprefix(CLUSTER_PREFIX + "_").split("_")
        if not name.startswith(CLUSTER_PREFIX + "_") or not parts[0].isdigit():
            continue
        if _alive(int(parts[0])):
            continue
        _run(["pg_dropcluster", "--stop", str(cluster["version"]), name])
        dropped.append(name)
    return dropped


@dataclass
class PrivateCluster:
    """A PostgreSQL cluster for one test module, on its own port, with trust auth.

    Made with Debian's ``pg_createcluster`` (as root), started, stopped and restarted with
    ``pg_ctlcluster``, dropped with ``pg_dropcluster``. Nobody else uses it, so the tests
    may restart or stop it while other test runs use the shared server on 5432.
    """

    version: str
    name: str
    port: int

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[PrivateCluster]:
        """Create and start a cluster; stop and drop it afterwards, whatever happened."""
        remove_stale_clusters()
        cluster = cls(
            postgres_version(), f"{CLUSTER_PREFIX}_{os.getpid()}_{uuid.uuid4().hex[:8]}", 0
        )
        try:
            cluster.port = free_port()
            _checked(
                ["pg_createcluster", cluster.version, cluster.name, "-p", str(cluster.port),
                 "--start-conf=manual", "-o", "fsync=off", "-o", "synchronous_commit=off",
                 "-o", "full_page_writes=off", "--", "--auth=trust"]
            )  # fmt: skip
            cluster.start()
            yield cluster
        finally:
            # Whatever state it is in (never created, half-created, running, stopped).
            _run(["pg_dropcluster", "--stop", cluster.version, cluster.name])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _ctl(self, action: str) -> None:
        # --skip-systemctl-redirect: act on the cluster directly (there is no systemd).
        _checked(["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action])

    def start(self) -> None:
        """Start the server; return once it accepts connections (pg_ctl waits)."""
        self._ctl("start")

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are terminated)."""
        self._ctl("stop")

    def restart(self) -> None:
        """Stop (fast) and start again; return once it accepts connections."""
        self._ctl("restart")

    def is_running(self) -> bool:
        return _run(["pg_ctlcluster", self.version, self.name, "status"]).returncode == 0


# -- an SMTP server that fails on command --------------------------------------------------


@dataclass
class FaultySmtp:
    """An aiosmtpd server on loopback whose next answers ``fault`` chooses.

    ``fault`` is None (a healthy server that keeps what it receives) or one of:
    ``rcpt-554`` / ``data-554`` (refuses the recipient / the message), ``rcpt-hangup`` /
    ``data-hangup`` (closes the connection instead of answering), ``ehlo-stall`` (greets,
    then never answers EHLO), ``data-stall`` (takes the whole message, then never gives
    the final reply). A stall lasts ``stall_seconds``; stopping the server ends it.
    ``on_data``, if set, runs (in a thread) when a message has been received, before the
    server answers it: a hook for a fault elsewhere at that moment.
    """

    host: str = "127.0.0.1"
    port: int = 0
    fault: str | None = None
    stall_seconds: float = 60.0
    on_data: Callable[[], None] | None = None
    messages: list[EmailMessage] = field(default_factory=list)
    recipients: list[str] = field(default_factory=list)
    #: SMTP commands received, by verb, whatever the answer.
    commands: Counter[str] = field(default_factory=Counter)
    _controller: Controller | None = None

    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    def start(self, port: int | None = None) -> FaultySmtp:
        """Listen on ``port`` (a free one if not given)."""
        self.port = port or free_port()
        self._controller = Controller(self, hostname=self.host, port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def reset(self) -> None:
        self.fault = None
        self.on_data = None
        self.messages.clear()
        self.recipients.clear()
        self.commands.clear()

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        self.commands["EHLO"] += 1
        session.host_name = hostname
        if self.fault == "ehlo-stall":
            await asyncio.sleep(self.stall_seconds)
        return responses

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.commands["RCPT"] += 1
        if self.fault == "rcpt-554":
            return "554 5.7.1 Recipient refused"
        if self.fault == "rcpt-hangup":
            server.transport.close()
            return "421 closing"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.commands["DATA"] += 1
        if self.fault == "data-554":
            return "554 5.7.1 Message refused"
        if self.fault == "data-hangup":
            server.transport.close()
            return "421 closing"
        if self.fault == "data-stall":
            await asyncio.sleep(self.stall_seconds)
            return "451 4.3.0 Too late"  # the client gave up long ago: nothing is kept
        if self.on_data is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.on_data)
        self.recipients.extend(envelope.rcpt_tos)
        self.messages.append(
            email.message_from_bytes(envelope.original_content, policy=policy.default)
        )
        return "250 Message accepted"


# -- HTTP endpoints that fail --------------------------------------------------------------

#: What a ``BrokenHTTP`` does with a request: take it and never answer, answer 500, answer
#: 200 with a body that is not JSON, or answer bytes that are not HTTP at all.
HTTP_FAULTS = ("stall", "http-500", "not-json", "not-http")


class BrokenHTTP:
    """An HTTP server on loopback that fails every request the way ``fault`` says.

    It stands in for an identity provider that is broken: no real provider (the Node OP)
    can be made to stall or to answer garbage. Each connection is accepted and its request
    read in full before the fault; ``hits`` counts requests by path. ``stop`` closes every
    connection, the stalled ones included.
    """

    def __init__(self, fault: str) -> None:
        assert fault in HTTP_FAULTS, fault
        self.fault = fault
        self.hits: Counter[str] = Counter()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self.origin = f"http://127.0.0.1:{self.port}"
        self._stopping = threading.Event()
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> BrokenHTTP:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._acceptor.join(5)
        for thread in self._threads:
            thread.join(5)
        with self._lock:
            for conn in self._connections:
                conn.close()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            path = self._read_request(conn)
        except OSError:
            return
        self.hits[path] += 1
        if self.fault == "stall":
            self._stopping.wait()
            return
        if self.fault == "not-http":
            payload = b"\x00\x17garbage, not HTTP\r\n\r\n"
        else:
            status, body, kind = {
                "http-500": (
                    "500 Internal Server Error",
                    b'{"error": "server_error"}',
                    "application/json",
                ),
                "not-json": ("200 OK", b"<html><body>Maintenance</body></html>", "text/html"),
            }[self.fault]
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            payload = head.encode() + body
        with contextlib.suppress(OSError):
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)

    @staticmethod
    def _read_request(conn: socket.socket) -> str:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("closed before the request ended")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(
            (int(v) for k, _, v in (h.partition(":") for h in lines[1:])
             if k.strip().lower() == "content-length"),
            0,
        )  # fmt: skip
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return lines[0].split(" ")[1].split("?")[0]


@contextlib.contextmanager
def syn_dropping_port() -> Iterator[int]:
    """A loopback port whose listener's accept queue is full, so the kernel drops new
    connection attempts (SYNs): a client's connect hangs until its connect timeout, as
    toward a host behind a firewall that drops packets."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = int(listener.getsockname()[1])
        fillers: list[socket.socket] = []
        try:
            # The queue of a listen(0) socket holds one connection; more attempts hang.
            for _ in range(4):
                filler = socket.socket()
                fillers.append(filler)
                filler.settimeout(0.3)
                try:
                    filler.connect(("127.0.0.1", port))
                except TimeoutError:
                    break
            else:
                raise RuntimeError("the accept queue never filled")
            yield port
        finally:
            for filler in fillers:
                filler.close()


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
