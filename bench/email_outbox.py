"""Measure how many ``POST signin/email`` requests per second land in the outbox.

Each request is a new browser (its ``GET csrf`` included in the time) asking a link for a
new address, so every one inserts a token row, counts two throttle windows and writes an
``.eml`` file: the whole request step of e-mail sign-in, minus the network. The app runs
in-process behind Flask's test client, so the figure is the application's and the
database's cost, not an HTTP server's. Throttle limits are raised so nothing is skipped.

    python -m bench.email_outbox --database-url postgresql+psycopg://postgres@127.0.0.1/bench \
        --threads 1 2 4 --seconds 10
"""

from __future__ import annotations

import argparse
import itertools
import logging
import tempfile
import threading
import time
from pathlib import Path

from flask import Flask

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.db import db


def build_app(database_url: str, outbox: str) -> Flask:
    app = create_app(
        {
            "APP_ENV": "development",
            "AUTH_SECRET": "bench-secret-" + "x" * 40,
            "AUTH_URL": "http://127.0.0.1:5000/auth",
            "DATABASE_URL": database_url,
            "EMAIL_OUTBOX": outbox,
            "EMAIL_IP_LIMIT": "100000000/1h",
            "TESTING": True,
        },
        environ={},
    )
    from flask_migrate import upgrade

    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
    return app


def run(app: Flask, threads: int, seconds: float, run_id: str) -> tuple[int, int]:
    """Return (messages written, failed requests) after ``seconds`` with ``threads``."""
    counter = itertools.count()
    sent = [0] * threads
    failed = [0] * threads
    deadline = time.monotonic() + seconds

    def worker(slot: int) -> None:
        while time.monotonic() < deadline:
            client = app.test_client()
            token = client.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
            address = f"bench-{run_id}-{next(counter)}@example.com"
            r = client.post("/auth/signin/email", data={"csrfToken": token, "email": address})
            if r.status_code == 302 and "/verify-request?" in r.headers["Location"]:
                sent[slot] += 1
            else:
                failed[slot] += 1

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(sent), sum(failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="a PostgreSQL URL (migrated here)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    # The outbox logs every message at INFO; that is for people, not for a load test.
    logging.getLogger("webapp").setLevel(logging.WARNING)

    with tempfile.TemporaryDirectory() as outbox:
        app = build_app(args.database_url, outbox)
        run(app, 1, 1.0, "warmup")
        print(f"{'threads':>7} {'messages':>9} {'failed':>6} {'msg/s':>8}")
        for threads in args.threads:
            before = len(list(Path(outbox).glob("*.eml")))
            started = time.monotonic()
            sent, failed = run(app, threads, args.seconds, f"t{threads}")
            elapsed = time.monotonic() - started
            written = len(list(Path(outbox).glob("*.eml"))) - before
            assert written == sent, (written, sent)
            print(f"{threads:>7} {sent:>9} {failed:>6} {sent / elapsed:>8.1f}")
        with app.app_context():
            db.engine.dispose()


if __name__ == "__main__":
    main()
