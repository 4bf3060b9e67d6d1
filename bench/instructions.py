"""Instructions per request, counted by callgrind: a figure that does not move with load.

Timings on a shared machine swing by a factor of two from minute to minute; the number of
instructions the interpreter executes for a request does not. This calls the WSGI app
in-process (no server, no network besides PostgreSQL) for ``GET /auth/session`` with the
seeded tokens in turn, twice under callgrind with different request counts, and prints the
difference per request, so start-up cancels out. It needs the database bench/run seeds
(``webapp_bench``, left in place after a run) and Debian's valgrind; it takes a few minutes.

    python -m bench.instructions [--path /auth/session] [--signed-out] [--access-log]
                                 [--url DATABASE_URL]

``--access-log`` counts the access log line too, written as the production server's
logging config (deploy/serve.py) writes it, to /dev/null.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import logging.config
import os
import re
import subprocess
import sys

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/webapp_bench"
SMALL, LARGE = 100, 300


def serve(path: str, requests: int, signed_in: bool, url: str, access_log: bool) -> None:
    """Build the app as production does and answer ``requests`` requests after a warm-up."""
    os.environ.update(
        APP_ENV="production",
        AUTH_SECRET="bench-only-secret-0123456789abcdef0123456789abcdef",
        AUTH_URL="http://127.0.0.1:8100/auth",
        AUTH_CONFIG=os.path.join(os.path.dirname(__file__), "providers.toml"),
        EMAIL_SERVER="smtp://127.0.0.1:2526",
        DATABASE_URL=url,
    )
    if access_log:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the life of this process)
        logging.config.dictConfig(_server_module().logging_config())
    from bench.seed import token
    from webapp.wsgi import app

    def environ(i: int) -> dict[str, object]:
        env: dict[str, object] = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8100",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1:8100",
        }
        if signed_in:
            env["HTTP_COOKIE"] = f"auth.session-token={token('live', i)}"
        return env

    statuses: list[str] = []
    for i in range(50 + requests):
        b"".join(app(environ(i), lambda status, headers, exc=None: statuses.append(status)))
    if any(not s.startswith("200") for s in statuses):
        raise SystemExit(f"unexpected answers: {sorted(set(statuses))}")


def _server_module():  # type: ignore[no-untyped-def]
    """deploy/serve.py, which is a script rather than a package's module."""
    where = os.path.join(os.path.dirname(os.path.dirname(__file__)), "deploy", "serve.py")
    spec = importlib.util.spec_from_file_location("deploy_serve", where)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def count(path: str, requests: int, signed_in: bool, url: str, access_log: bool) -> int:
    command = (
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "bench.instructions",
            "--serve",
            str(requests),
            "--path",
            path,
            "--url",
            url,
        ]
        + ([] if signed_in else ["--signed-out"])
        + (["--access-log"] if access_log else [])
    )
    out = subprocess.run(command, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="/auth/session")
    parser.add_argument("--signed-out", action="store_true")
    parser.add_argument("--access-log", action="store_true")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.path, args.serve, not args.signed_out, args.url, args.access_log)
        return
    small = count(args.path, SMALL, not args.signed_out, args.url, args.access_log)
    large = count(args.path, LARGE, not args.signed_out, args.url, args.access_log)
    state = ("signed out" if args.signed_out else "signed in") + (
        ", access log on" if args.access_log else ""
    )
    per_request = (large - small) // (LARGE - SMALL)
    print(f"GET {args.path} ({state}): {per_request:,} instructions per request")


if __name__ == "__main__":
    main()
