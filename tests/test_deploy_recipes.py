"""The operator's recipes in deploy/ pass their own tools' checks (docs/deploy.md).

- The systemd units (deploy/systemd/): ``systemd-analyze verify`` finds nothing to say
  about them, with their /srv/webapp-signin paths pointed at this checkout (verify checks
  that each command exists); ``systemd-analyze security`` rates the services' exposure
  low; and what they say about stopping and reloading matches what the server does.
- HAProxy (deploy/haproxy.cfg): ``haproxy -c`` passes, warnings counting as failures,
  with a throwaway certificate in place of the real one; then, run on loopback in front
  of a backend that records what it is sent, it redirects http to https and replaces
  every forwarded header and request id a client sends.
- PgBouncer (deploy/pgbouncer.ini): it starts with the file (addresses, paths and files
  swapped for temporary ones), and a temporary role logs in through it with a SCRAM
  password over TLS and runs ``SELECT 1``; a wrong password and a connection without TLS
  are refused.

Each check also runs on a broken copy, which it must fail. The programs come from
Debian's systemd, haproxy and pgbouncer packages; without one the tests that need it are
skipped, and fail under CI=true.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import pwd
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from webapp.telemetry.logs import new_request_id

from .support.config import IN_CI
from .support.databases import PG_ADMIN_URL, pg_admin_engine, require_postgres
from .support.servers import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = DEPLOY / "systemd"
SERVER_UNIT = "webapp-signin.service"
CLEANUP_UNIT = "webapp-signin-cleanup.service"
CLEANUP_TIMER = "webapp-signin-cleanup.timer"
#: Where the units expect the checkout (and its .venv) on a server.
INSTALLED_AT = "/srv/webapp-signin"
#: The most exposure ``systemd-analyze security`` may rate a service at (0 to 10; the
#: units are at 1.7, an unhardened service at 9.2).
MOST_EXPOSURE = 2.0
SITE = "example.com"


def program(name: str, package: str) -> str:
    """The path of ``name`` (also looked for in /usr/sbin); skip without it, or fail
    under CI."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        message = f"{name} is missing: apt-get install -y {package} (scripts/test does)"
        if IN_CI:
            pytest.fail(message + " (CI=true: a missing program is a failure)", pytrace=False)
        pytest.skip(message)
    return found


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def replaced(text: str, *pairs: tuple[str, str]) -> str:
    """``text`` with each ``old`` replaced by ``new``; each must be there (so a recipe
    changed under the test fails it rather than going unchecked)."""
    for old, new in pairs:
        assert old in text, f"{old!r} is no longer there"
        text = text.replace(old, new)
    return text


# --- systemd -------------------------------------------------------------------------------


def units_here(folder: Path, *changes: tuple[str, str, str]) -> list[Path]:
    """Copies of the three units in ``folder``, their paths pointing at this checkout;
    ``changes`` are ``(unit, old, new)`` replacements on top (the broken copies)."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for name in (SERVER_UNIT, CLEANUP_UNIT, CLEANUP_TIMER):
        text = (UNITS / name).read_text()
        if name.endswith(".service"):
            text = replaced(text, (INSTALLED_AT, str(ROOT)))
        for unit, old, new in changes:
            if unit == name:
                text = replaced(text, (old, new))
        (folder / name).write_text(text)
        copies.append(folder / name)
    return copies


def verify(units: list[Path]) -> str:
    """What ``systemd-analyze verify`` says about ``units``: "" when they are sound. Some
    mistakes (an unknown directive, a value it cannot parse) are only warned about, with
    exit status 0; they count here."""
    analyze = program("systemd-analyze", "systemd")
    done = run(analyze, "verify", "--man=no", *map(str, units))
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        return said or f"exit status {done.returncode}"
    return said


def directives(text: str) -> dict[str, list[str]]:
    """A unit's ``Section.Key`` → its values, in order (a key may be given several times)."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return found


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    assert verify(units_here(tmp_path)) == ""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param(
            (SERVER_UNIT, "Restart=on-failure", "Restrat=on-failure"),
            "Unknown key 'Restrat'",
            id="unknown-key",
        ),
        pytest.param(
            (SERVER_UNIT, "KillMode=mixed", "KillMode=gentle"),
            "Failed to parse kill mode",
            id="bad-value",
        ),
        pytest.param(
            (SERVER_UNIT, "/scripts/serve", "/scripts/serve-nowhere"),
            "serve-nowhere is not executable",
            id="missing-program",
        ),
        pytest.param(
            (CLEANUP_UNIT, "Type=oneshot", "Type=oneshoot"),
            "Failed to parse service type",
            id="bad-type",
        ),
        pytest.param(
            (CLEANUP_TIMER, "OnCalendar=hourly", "OnCalendar=hourlyy"),
            "Failed to parse calendar specification",
            id="bad-schedule",
        ),
    ],
)
def test_a_broken_unit_fails_the_same_check(
    tmp_path: Path, change: tuple[str, str, str], said: str
) -> None:
    assert said in verify(units_here(tmp_path, change))


#: The hardening directives, each alone on its line (removed for the negative control).
HARDENING = re.compile(
    r"^(NoNewPrivileges|Protect\w+|Private\w+|CapabilityBoundingSet|Restrict\w+|"
    r"LockPersonality|SystemCall\w+|UMask)=.*\n",
    re.M,
)


def exposure_over_limit(unit: Path) -> str:
    """``systemd-analyze security``'s verdict when ``unit`` is exposed more than
    ``MOST_EXPOSURE``; "" when it is not."""
    analyze = program("systemd-analyze", "systemd")
    done = run(
        analyze,
        "security",
        "--offline=yes",
        f"--threshold={round(MOST_EXPOSURE * 10)}",
        "--no-pager",
        str(unit),
    )
    return "" if done.returncode == 0 else done.stdout.strip().splitlines()[-1]


def test_the_services_are_hardened(tmp_path: Path) -> None:
    units = units_here(tmp_path)
    for unit in units[:2]:
        assert exposure_over_limit(unit) == ""
        # The same unit without its hardening is rated over the limit.
        bare = tmp_path / "bare" / unit.name
        bare.parent.mkdir(exist_ok=True)
        bare.write_text(HARDENING.sub("", unit.read_text()))
        assert "UNSAFE" in exposure_over_limit(bare)


def test_the_server_unit_stops_and_reloads_as_the_server_does() -> None:
    """systemd's stop waits for the server's own graceful stop; a reload migrates, then
    sends the server SIGHUP; no secret is in a unit."""
    spec = importlib.util.spec_from_file_location("serve", DEPLOY / "serve.py")
    assert spec is not None and spec.loader is not None
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    unit = directives((UNITS / SERVER_UNIT).read_text())
    migrate = f"{INSTALLED_AT}/.venv/bin/flask --app app auth migrate"
    assert unit["Service.ExecStart"] == [f"{INSTALLED_AT}/scripts/serve"]
    assert unit["Service.ExecStartPre"] == [migrate]
    assert unit["Service.ExecReload"] == [migrate, "/bin/kill -HUP $MAINPID"]
    assert unit["Service.KillSignal"] == ["SIGTERM"]
    # SIGTERM to the server process alone, which lets its workers finish.
    assert unit["Service.KillMode"] == ["mixed"]
    assert int(unit["Service.TimeoutStopSec"][0]) > serve.GRACEFUL_SECONDS
    assert unit["Service.Restart"] == ["on-failure"]
    for name in (SERVER_UNIT, CLEANUP_UNIT):
        text = (UNITS / name).read_text()
        assert directives(text)["Service.EnvironmentFile"] == ["/etc/webapp-signin/env"]
        assert not re.search(r"^Environment=.*(SECRET|PASSWORD|DATABASE_URL)", text, re.M)
    timer = directives((UNITS / CLEANUP_TIMER).read_text())
    assert timer["Timer.OnCalendar"] == ["hourly"]
    assert timer["Timer.Persistent"] == ["true"]
    assert timer["Timer.RandomizedDelaySec"]


# --- HAProxy -------------------------------------------------------------------------------


def certificate(folder: Path) -> Path:
    """A throwaway self-signed certificate for ``SITE``, with its key, in one PEM file."""
    key, cert = folder / "site.key", folder / "site.crt"
    made = run(
        program("openssl", "openssl"),
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        f"/CN={SITE}",
        "-days",
        "1",
        "-keyout",
        str(key),
        "-out",
        str(cert),
    )
    assert made.returncode == 0, made.stderr
    pem = folder / "site.pem"
    pem.write_text(cert.read_text() + key.read_text())
    return pem


def haproxy_config(folder: Path, *changes: tuple[str, str]) -> Path:
    """deploy/haproxy.cfg with a throwaway certificate in place of the real one."""
    text = replaced(
        (DEPLOY / "haproxy.cfg").read_text(),
        ("/etc/haproxy/certs/example.com.pem", str(certificate(folder))),
        *changes,
    )
    path = folder / "haproxy.cfg"
    path.write_text(text)
    return path


def haproxy_check(config: Path) -> str:
    """What ``haproxy -c`` says about ``config`` when it fails it ("" when it passes);
    ``-dW`` makes a warning fail it too."""
    done = run(program("haproxy", "haproxy"), "-c", "-dW", "-f", str(config))
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()


def test_haproxy_cfg_passes_haproxy_check(tmp_path: Path) -> None:
    assert haproxy_check(haproxy_config(tmp_path)) == ""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param(
            ("set-header X-Forwarded-Proto", "set-headr X-Forwarded-Proto"),
            "Did you mean 'set-header'",
            id="typo",
        ),
        # HAProxy only warns when a frontend has no client timeout.
        pytest.param(("timeout client 30s\n", ""), "'zero-warning' is set", id="warning"),
        pytest.param(
            ("server app2 10.0.0.12:8000\n", "server app2 10.0.0.12:80000\n"),
            "invalid port '80000'",
            id="port",
        ),
    ],
)
def test_a_broken_haproxy_cfg_fails_the_same_check(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    assert said in haproxy_check(haproxy_config(tmp_path, change))


def test_haproxy_cfg_without_its_certificate_fails_the_check(tmp_path: Path) -> None:
    config = haproxy_config(tmp_path)
    config.write_text(config.read_text().replace(str(tmp_path / "site.pem"), "/nonexistent.pem"))
    assert "nonexistent.pem" in haproxy_check(config)


@dataclass
class Recorder:
    """A backend on loopback answering 200 to everything; keeps each request (but the
    health checks) as its path and its headers, every copy of each."""

    port: int
    requests: list[tuple[str, list[tuple[str, str]]]]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path not in ("/readyz", "/healthz"):
                seen.append((self.path, [(k.lower(), v) for k, v in self.headers.items()]))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Recorder(server.server_address[1], seen)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Balancer:
    http_port: int
    https_port: int
    log: Path


@pytest.fixture
def balancer(tmp_path: Path, recorder: Recorder) -> Iterator[Balancer]:
    """deploy/haproxy.cfg running on loopback ports in front of ``recorder`` (both
    instances), logging to a file; the only other changes: no chroot and no user switch
    (the test may not run as root), the admin socket in the test's folder."""
    http_port, https_port = free_port(), free_port()
    config = haproxy_config(
        tmp_path,
        ("bind :80\n", f"bind 127.0.0.1:{http_port}\n"),
        ("bind :443 ", f"bind 127.0.0.1:{https_port} "),
        ("10.0.0.11:8000", f"127.0.0.1:{recorder.port}"),
        ("10.0.0.12:8000", f"127.0.0.1:{recorder.port}"),
        ("log /dev/log local0", "log stdout format raw local0"),
        ("/run/haproxy/admin.sock", str(tmp_path / "admin.sock")),
        ("chroot /var/lib/haproxy\n", ""),
        ("user haproxy\n", ""),
        ("group haproxy\n", ""),
    )
    log = tmp_path / "haproxy.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [program("haproxy", "haproxy"), "-db", "-f", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Balancer(http_port, https_port, log)
    finally:
        process.terminate()
        process.wait(timeout=10)


def send(
    port: int, path: str, headers: list[tuple[str, str]], *, tls: bool
) -> http.client.HTTPResponse:
    """GET ``path`` with exactly ``headers`` (repeats included, Host among them)."""
    connection: http.client.HTTPConnection
    if tls:
        # The throwaway certificate: nothing to verify it against.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers:
        connection.putheader(name, value)
    connection.endheaders()
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def eventually(check: Callable[[], bool], what: str, within: float = 10) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not after {within} s: {what}")
        time.sleep(0.05)


def serving(balancer: Balancer) -> None:
    """Wait until HAProxy answers through the backend."""

    def answered() -> bool:
        try:
            return send(balancer.https_port, "/", [("Host", SITE)], tls=True).status == 200
        except OSError:
            return False

    eventually(answered, "HAProxy answering through the backend")


#: What a client sends to choose its address, scheme, host and request id.
FORGED = [
    ("Host", "attacker.example"),
    ("X-Forwarded-For", "203.0.113.66"),
    ("X-Forwarded-For", "198.51.100.7, 203.0.113.66"),
    ("X-Forwarded-Proto", "http"),
    ("X-Forwarded-Host", "attacker.example"),
    ("X-Forwarded-Port", "8443"),
    ("Forwarded", "for=203.0.113.66;proto=http;host=attacker.example"),
    ("X-Real-IP", "203.0.113.66"),
    ("X-Request-ID", "chosen-by-the-client"),
]


def test_through_haproxy_the_app_gets_only_what_haproxy_sets(
    balancer: Balancer, recorder: Recorder
) -> None:
    path = "/auth/callback/email?token=secret-link-token&email=pat%40example.com"
    serving(balancer)
    assert send(balancer.https_port, path, FORGED, tls=True).status == 200
    sent_path, headers = recorder.requests[-1]
    assert sent_path == path

    def values(name: str) -> list[str]:
        return [value for key, value in headers if key == name]

    assert values("host") == [SITE]
    assert values("x-forwarded-host") == [SITE]
    assert values("x-forwarded-for") == ["127.0.0.1"]
    assert values("x-forwarded-proto") == ["https"]
    for name in ("forwarded", "x-forwarded-port", "x-real-ip"):
        assert values(name) == [], name
    [request_id] = values("x-request-id")
    assert request_id != "chosen-by-the-client"
    assert new_request_id(request_id) == request_id  # one the app keeps and logs
    # HAProxy's log line names the request id and leaves the query string out.
    eventually(lambda: request_id in balancer.log.read_text(), "the request in HAProxy's log")
    [line] = [line for line in balancer.log.read_text().splitlines() if request_id in line]
    assert "/auth/callback/email" in line
    assert "secret-link-token" not in balancer.log.read_text()


def test_haproxy_sends_plain_http_to_the_site_over_https(
    balancer: Balancer, recorder: Recorder
) -> None:
    serving(balancer)
    before = len(recorder.requests)
    answer = send(balancer.http_port, "/auth/signin?callbackUrl=%2Faccount", FORGED, tls=False)
    assert answer.status == 301
    # To the site's own name, whatever Host the client sent.
    assert answer.getheader("Location") == f"https://{SITE}/auth/signin?callbackUrl=%2Faccount"
    assert len(recorder.requests) == before


# --- PgBouncer -------------------------------------------------------------------------------


@dataclass
class Role:
    name: str
    password: str


@pytest.fixture
def scram_role() -> Iterator[Role]:
    """A temporary PostgreSQL role with a password, which PostgreSQL stores as a SCRAM
    secret; dropped afterwards."""
    require_postgres()
    role = Role(f"recipes_{secrets.token_hex(4)}", secrets.token_urlsafe(16))
    with pg_admin_engine().connect() as connection:
        connection.exec_driver_sql("SET password_encryption = 'scram-sha-256'")
        connection.exec_driver_sql(f"CREATE ROLE {role.name} LOGIN PASSWORD '{role.password}'")
    try:
        yield role
    finally:
        with pg_admin_engine().connect() as connection:
            connection.exec_driver_sql(f"DROP ROLE {role.name}")


def scram_secret(role: Role) -> str:
    with pg_admin_engine().connect() as connection:
        secret = connection.execute(
            sa.text("SELECT rolpassword FROM pg_authid WHERE rolname = :name"), {"name": role.name}
        ).scalar_one()
    assert secret.startswith("SCRAM-SHA-256$")
    return str(secret)


@pytest.fixture
def pgbouncer_folder(tmp_path: Path) -> Iterator[Path]:
    """Where PgBouncer's files go. PgBouncer refuses to run as root: as root it is started
    as postgres, which must then be able to write its log and pid file there."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="recipes-pgbouncer-"))
    postgres = pwd.getpwnam("postgres")
    os.chown(folder, postgres.pw_uid, postgres.pw_gid)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def settings_replaced(text: str, values: dict[str, str]) -> str:
    """An ini file's ``key = value`` lines given new values; each key must be there once."""
    for key, value in values.items():
        text, count = re.subn(rf"^{re.escape(key)} = .*$", f"{key} = {value}", text, flags=re.M)
        assert count == 1, f"{key} is set {count} times in deploy/pgbouncer.ini"
    return text


@dataclass
class Pooler:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def url(self, role: Role, *, password: str | None = None, sslmode: str = "require") -> str:
        return (
            f"host=127.0.0.1 port={self.port} dbname=webapp user={role.name} "
            f"password={password or role.password} sslmode={sslmode} connect_timeout=5"
        )


def start_pgbouncer(folder: Path, role: Role, **overrides: str) -> Pooler:
    """deploy/pgbouncer.ini with loopback addresses, this folder's paths, a userlist
    holding ``role``'s SCRAM secret, a throwaway certificate, and the ``webapp`` database
    pointed at the test PostgreSQL; then PgBouncer started with it, and listening."""
    pgbouncer = program("pgbouncer", "pgbouncer")
    (folder / "userlist.txt").write_text(f'"{role.name}" "{scram_secret(role)}"\n')
    made = run(
        program("openssl", "openssl"),
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-days",
        "1",
        "-keyout",
        str(folder / "pgbouncer.key"),
        "-out",
        str(folder / "pgbouncer.crt"),
    )
    assert made.returncode == 0, made.stderr
    pg = sa.engine.make_url(PG_ADMIN_URL)
    port = free_port()
    values = {
        "webapp": f"host={pg.host or '127.0.0.1'} port={pg.port or 5432} dbname=postgres",
        "listen_addr": "127.0.0.1",
        "listen_port": str(port),
        "unix_socket_dir": "",
        "logfile": str(folder / "pgbouncer.log"),
        "pidfile": str(folder / "pgbouncer.pid"),
        "auth_file": str(folder / "userlist.txt"),
        "client_tls_key_file": str(folder / "pgbouncer.key"),
        "client_tls_cert_file": str(folder / "pgbouncer.crt"),
        "stats_users": role.name,
        **overrides,
    }
    config = folder / "pgbouncer.ini"
    config.write_text(settings_replaced((DEPLOY / "pgbouncer.ini").read_text(), values))
    as_user = ["-u", "postgres"] if os.geteuid() == 0 else []
    process = subprocess.Popen(
        [pgbouncer, *as_user, str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pooler = Pooler(port, process, folder / "pgbouncer.log")

    def listening() -> bool:
        if process.poll() is not None:
            return True
        return pooler.log.exists() and f"listening on 127.0.0.1:{port}" in pooler.log.read_text()

    eventually(listening, "PgBouncer listening")
    return pooler


def stop(pooler: Pooler) -> None:
    if pooler.process.poll() is None:
        pooler.process.terminate()
        pooler.process.wait(timeout=10)


def test_pgbouncer_starts_with_the_ini_and_takes_a_scram_login(
    pgbouncer_folder: Path, scram_role: Role
) -> None:
    pooler = start_pgbouncer(pgbouncer_folder, scram_role)
    try:
        assert pooler.process.poll() is None, pooler.log.read_text()
        with psycopg.connect(pooler.url(scram_role)) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
            assert connection.info.pgconn.ssl_in_use
        # What is in force is what the file says.
        with psycopg.connect(
            pooler.url(scram_role).replace("dbname=webapp", "dbname=pgbouncer"),
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,
        ) as console:
            config = {row[0]: row[1] for row in console.execute("SHOW CONFIG").fetchall()}
        assert config["auth_type"] == "scram-sha-256"
        assert config["pool_mode"] == "transaction"
        assert config["client_tls_sslmode"] == "require"
        # The password is checked (SCRAM, not trust), and TLS is required.
        with pytest.raises(psycopg.OperationalError, match="SASL authentication failed"):
            psycopg.connect(pooler.url(scram_role, password="not-" + scram_role.password))
        with pytest.raises(psycopg.OperationalError, match="SSL required"):
            psycopg.connect(pooler.url(scram_role, sslmode="disable"))
    finally:
        stop(pooler)
    assert "login attempt: db=webapp" in pooler.log.read_text()


def test_pgbouncer_does_not_start_with_a_broken_ini(
    pgbouncer_folder: Path, scram_role: Role
) -> None:
    pooler = start_pgbouncer(pgbouncer_folder, scram_role, auth_type="scram-sha-265")
    try:
        assert pooler.process.wait(timeout=10) != 0
    finally:
        stop(pooler)
    assert 'invalid value "scram-sha-265" for parameter auth_type' in pooler.log.read_text()
