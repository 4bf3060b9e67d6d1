"""The production server set-up: granian with deploy/serve.py (scripts/serve)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from .support.servers import run_server

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "webapp" / "static"


@contextmanager
def _server(tmp_path: Path, **settings: str) -> Iterator[tuple[str, Path, Path]]:
    """Run the production server; yield its URL, its stdout (access lines) and stderr."""
    with run_server(tmp_path, **settings) as server:
        yield server.url, server.access_log, server.error_log


def _line_with(log: Path, text: str) -> str:
    """The one line of ``log`` containing ``text`` (written once the answer is sent)."""
    for _ in range(50):
        if text in log.read_text():
            break
        time.sleep(0.1)
    [line] = [x for x in log.read_text().splitlines() if text in x]
    return line


def test_the_server_serves_the_app_and_logs_each_request_in_the_documented_format(tmp_path):
    with _server(tmp_path) as (base, log, _):
        r = requests.get(
            f"{base}/auth/session", timeout=5, headers={"User-Agent": 'probe "quoted" 1.0'}
        )
        assert r.status_code == 200 and r.json() is None
        rid = r.headers["X-Request-ID"]
        line = _line_with(log, rid)
        assert line.startswith('127.0.0.1 "GET /auth/session HTTP/1.1" 200 5 ')
        assert line.endswith(f'ms rid={rid} "probe \\"quoted\\" 1.0"')


def test_the_access_log_holds_no_link_token_and_no_forged_line(tmp_path):
    with _server(tmp_path) as (base, log, errors):
        link = f"{base}/auth/callback/email?token=SECRETTOKEN1&email=ann%40example.com"
        r = requests.get(link, allow_redirects=False, timeout=5)
        line = _line_with(log, r.headers["X-Request-ID"])
        assert ' "GET /auth/callback/email?token=[redacted]&email=ann%40example.com HTTP/1.1" ' in (
            line
        )
        # Bytes 0x80-0xFF pass some HTTP parsers; 0x85 is a line break to str.splitlines.
        # granian hands the app an empty value for a header that is not visible ASCII.
        r = requests.get(
            f"{base}/auth/csrf", timeout=5, headers={"User-Agent": "probe\x85FORGED line"}
        )
        line = _line_with(log, r.headers["X-Request-ID"])
        assert line.endswith(' ""')
        # A malformed request line is refused before the app sees it.
        with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:
            sock.sendall(
                b"GET /auth/callback/email?token=SECRETTOKEN2\x85 HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            assert sock.recv(1024).startswith(b"HTTP/1.1 400")
    text = log.read_text(encoding="utf-8") + errors.read_text(encoding="utf-8")
    assert "SECRETTOKEN" not in text and "\x85" not in text
    assert all("FORGED" not in x or x.startswith("127.0.0.1") for x in text.splitlines())


def test_static_files_are_served_and_logged_with_their_request_id(tmp_path):
    favicon = Path(__file__).resolve().parent.parent / "webapp" / "static" / "favicon.svg"
    with _server(tmp_path) as (base, log, _):
        r = requests.get(f"{base}/static/favicon.svg", timeout=5)
        assert r.status_code == 200 and r.content == favicon.read_bytes()
        line = _line_with(log, r.headers["X-Request-ID"])
        assert line.startswith(
            f'127.0.0.1 "GET /static/favicon.svg HTTP/1.1" 200 {len(r.content)} '
        )
        assert line.endswith(
            f'ms rid={r.headers["X-Request-ID"]} "python-requests/{requests.__version__}"'
        )


def test_a_stop_lets_the_requests_in_flight_finish(tmp_path):
    """SIGTERM (a deploy, a rolling restart) lets the answers under way go out: a sign-in
    waiting on an SMTP server that never greets still gets its answer (EmailSignin, once
    EMAIL_TIMEOUT is up), and the server then exits."""
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
    smtp = f"smtp://127.0.0.1:{silent.getsockname()[1]}"
    with run_server(tmp_path, EMAIL_SERVER=smtp, EMAIL_TIMEOUT="2") as server:
        browser = requests.Session()
        token = browser.get(f"{server.url}/auth/csrf", timeout=5).json()["csrfToken"]
        answers: list[requests.Response] = []

        def sign_in() -> None:
            form = {"csrfToken": token, "email": "ann@example.com"}
            url = f"{server.url}/auth/signin/email"
            answers.append(browser.post(url, data=form, allow_redirects=False, timeout=10))

        waiting = threading.Thread(target=sign_in)
        waiting.start()
        for _ in range(50):  # until the app is waiting on the SMTP server
            if held:
                break
            time.sleep(0.1)
        assert held, "the sign-in never reached the SMTP server"
        process = server.process
        process.send_signal(signal.SIGTERM)
        waiting.join(10)
        [answer] = answers
        assert answer.status_code == 302
        assert "error=EmailSignin" in answer.headers["Location"]
        assert process.wait(timeout=25) == 0
    for sock in (*held, silent):
        sock.close()


def _run_in_production(database: str, script: str) -> str:
    """What ``script`` prints, run by a new interpreter with the production settings."""
    env = {
        **os.environ,
        "APP_ENV": "production",
        "AUTH_SECRET": "s" * 40,
        "AUTH_URL": "https://example.com/auth",
        "DATABASE_URL": database,
        "EMAIL_SERVER": "smtp://127.0.0.1:2525",
        "AUTH_PASSKEYS": "true",
    }
    env.pop("AUTH_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_worker_loads_neither_alembic_nor_py_webauthn_nor_segno(tmp_path):
    # The served app (webapp.wsgi) leaves out what only commands, passkey ceremonies or QR
    # codes need: Alembic (flask auth migrate) about 10 MB, py_webauthn about 5 MB and
    # segno about 1 MB a worker.
    script = (
        "import sys, webapp.wsgi\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'alembic', 'flask_migrate', 'webauthn', 'mako', 'segno'}))"
    )
    assert _run_in_production(f"sqlite:///{tmp_path / 'db.sqlite3'}", script) == "[]"


#: A library module is one installed in the environment rather than the standard library's.
_LIBRARY_MODULES = (
    "import json, sys, sysconfig\n"
    "libraries = sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']\n"
    "def loaded():\n"
    "    files = {m: getattr(x, '__file__', None) or '' for m, x in sys.modules.items()}\n"
    "    return sorted(m for m, f in files.items() if f.startswith(libraries))\n"
)


def test_the_server_preloads_the_libraries_the_app_loads(postgres_url):
    """deploy/serve.py imports the app's libraries before forking the workers, which then
    share them: every module it names is one the served app imports (on PostgreSQL, as in
    production), and together they bring in nearly every library module the app loads (a
    new dependency joins the list)."""
    script = _LIBRARY_MODULES + "import webapp.wsgi\nprint(json.dumps(loaded()))"
    served = json.loads(_run_in_production(postgres_url, script))
    script = (
        _LIBRARY_MODULES + "sys.path.insert(0, 'deploy')\nimport serve\nserve.preload_libraries()\n"
        "print(json.dumps({'names': serve.PRELOADED, 'loaded': loaded()}))"
    )
    preloaded = json.loads(_run_in_production(postgres_url, script))
    assert set(preloaded["names"]) - set(served) == set()
    left = sorted(set(served) - set(preloaded["loaded"]))
    assert len(left) <= len(served) // 50, f"imported by each worker, not preloaded: {left}"


def test_a_body_held_in_memory_is_handed_over_whole_and_a_stream_as_it_is(app):
    """granian sends a list's bytes in one call, but reads any other body item by item from
    one of its threads, taking the GIL for each: answers built in memory go as a list,
    whatever the layers around Flask (the access line then is written at once, the test
    above reads it); a file is still handed over to be streamed, and HEAD gets no body."""

    def call(path: str, method: str = "GET") -> tuple[str, object]:
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "localhost",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(),
            "wsgi.errors": sys.stderr,
        }
        answer: list[str] = []
        body = app.wsgi_app(environ, lambda status, headers, exc=None: answer.append(status))
        return answer[0], body

    status, body = call("/auth/session")
    assert status == "200 OK" and isinstance(body, list) and body == [b"null\n"]
    status, body = call("/auth/providers")
    assert isinstance(body, list) and len(body) == 1 and b'"signinUrl"' in body[0]
    status, body = call("/auth/session", "HEAD")
    assert status == "200 OK" and body == [b""]
    status, body = call("/static/favicon.svg")
    assert status == "200 OK" and not isinstance(body, list)
    try:
        assert b"".join(body) == (STATIC / "favicon.svg").read_bytes()  # type: ignore[arg-type]
    finally:
        body.close()  # type: ignore[attr-defined]


def test_a_second_server_on_a_port_in_use_stops_with_a_clear_error(tmp_path):
    """granian binds with SO_REUSEPORT, which would let a second server share the port
    (the kernel splitting connections between two versions of the app): the server refuses
    to start instead, whoever holds the port."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = subprocess.run(
            [sys.executable, "deploy/serve.py"],
            cwd=ROOT,
            env={**os.environ, "APP_ENV": "development", "PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert started.returncode != 0
    assert f"cannot serve on 127.0.0.1:{port}: Address already in use" in started.stderr
