"""Create and seed the benchmark database: users, live and expired sessions, filler rows.

Rows are generated inside PostgreSQL (``INSERT … SELECT generate_series``), so seeding a
million sessions sends a few statements, not a million rows. Tokens are deterministic
(``token("live", 7)``) so the wrk scripts can build the cookies without a token file; the
database holds only their SHA-256, computed by PostgreSQL exactly as ``hash_token`` does.

    python -m bench.seed create  --admin-url URL --name DB
    python -m bench.seed seed    --url URL --users 10000 --sessions 100000 --expired 20000 \
                                 [--events 30]
    python -m bench.seed refill-expired --url URL --count 50000
    python -m bench.seed filler  --url URL --total 1000000 [--expired]
"""

from __future__ import annotations

import argparse
import re

import psycopg

from webapp.sessions.store import hash_token

#: Session tokens are 43 characters, as real ones (32 bytes in base64url) are.
TOKEN_WIDTH = 32
#: Browsers the sessions were opened with, in turn: the account page parses each one.
USER_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/18.1 Safari/605.1.15",
)
#: (type, outcome, error code, device) of the events each user has, oldest first, in turn:
#: the account page's "Recent activity" shows the newest 5 of them.
EVENTS = (
    ("signin", "success", None, "Firefox on Linux"),
    ("email.requested", "success", None, "Chrome on Windows"),
    ("code.failed", "failure", "InvalidCode", "Safari on iOS"),
    ("signin", "success", None, "Safari on iOS"),
    ("session.revoked", "success", None, "Firefox on Linux"),
    ("signout", "success", None, "Safari on macOS"),
)

#: Live sessions expire between 30 days and 30 days minus this many seconds from now, all
#: well inside the update age (1 day): reading them must write nothing.
LIVE_SPREAD_SECONDS = 3600


def token(kind: str, index: int) -> str:
    """Return the cookie value of seeded session ``index`` of ``kind`` (live or expired)."""
    return f"bench-{kind}-{index:0{TOKEN_WIDTH}d}"


def _sql_token(kind: str) -> str:
    # The same format as token(), computed by PostgreSQL for generate_series' ``i``.
    return f"'bench-{kind}-' || lpad(i::text, {TOKEN_WIDTH}, '0')"


def _sql_hash(expression: str) -> str:
    return f"encode(sha256(convert_to({expression}, 'UTF8')), 'hex')"


def libpq_url(url: str) -> str:
    """Turn a SQLAlchemy URL (``postgresql+psycopg://``) into one libpq accepts."""
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)


def create_database(admin_url: str, name: str) -> str:
    """Drop and create database ``name``; return its URL (same server as ``admin_url``)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise ValueError(f"not a plain database name: {name!r}")
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return re.sub(r"/[^/]*$", f"/{name}", admin_url)


def seed(url: str, *, users: int, sessions: int, expired: int, events: int) -> None:
    """Insert ``users`` users, ``sessions`` live sessions, ``expired`` expired ones, and
    ``events`` audit events per user.

    Live session ``i`` belongs to user ``i mod users``; users are ``user<n>@bench.example``.
    """
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("TRUNCATE users, sessions, auth_events RESTART IDENTITY CASCADE")
        conn.execute(
            """
            INSERT INTO users (name, email, email_verified, image, created_at, updated_at)
            SELECT 'Bench User ' || i, 'user' || i || '@bench.example', now(),
                   'https://img.bench.example/' || i || '.png', now(), now()
            FROM generate_series(0, %(n)s - 1) AS i
            """,
            {"n": users},
        )
        _insert_sessions(conn, "live", sessions, users)
        _insert_sessions(conn, "expired", expired, users)
        _insert_events(conn, events)
        conn.execute("ANALYZE users")
        conn.execute("ANALYZE sessions")
        conn.execute("ANALYZE auth_events")


def _values(rows: tuple[tuple[str | None, ...], ...]) -> str:
    """``rows`` as a SQL VALUES list numbered from 0 (column ``n``)."""

    def literal(value: str | None) -> str:
        return "NULL" if value is None else "'" + value.replace("'", "''") + "'"

    return ", ".join(
        "(" + ", ".join([str(n), *(literal(v) for v in row)]) + ")" for n, row in enumerate(rows)
    )


def _insert_events(conn: psycopg.Connection, per_user: int) -> None:
    """Give every user ``per_user`` events, an hour apart, ending an hour ago."""
    conn.execute(
        f"""
        INSERT INTO auth_events (occurred_at, type, outcome, error_code, user_id, provider,
                                 ip, device)
        SELECT now() - (%(n)s - e) * interval '1 hour', kind.type, kind.outcome, kind.code,
               u.id, 'email', '192.0.2.' || (e %% 200 + 1), kind.device
        FROM users AS u
        CROSS JOIN generate_series(0, %(n)s - 1) AS e
        JOIN (VALUES {_values(EVENTS)}) AS kind (n, type, outcome, code, device)
          ON kind.n = e %% {len(EVENTS)}
        """,
        {"n": per_user},
    )


def _insert_sessions(conn: psycopg.Connection, kind: str, count: int, users: int) -> None:
    expires = (
        f"now() + interval '30 days' - (i %% {LIVE_SPREAD_SECONDS}) * interval '1 second'"
        if kind == "live"
        else "now() - interval '1 hour' - (i %% 86400) * interval '1 second'"
    )
    conn.execute(
        f"""
        INSERT INTO sessions (user_id, token_hash, expires, created_at, last_active_at,
                              ip, user_agent, provider)
        SELECT (SELECT min(id) FROM users) + i %% %(users)s,
               {_sql_hash(_sql_token(kind))}, {expires},
               now() - interval '1 hour', now() - interval '1 hour',
               '127.0.0.1', agent.ua, 'email'
        FROM generate_series(0, %(n)s - 1) AS i
        JOIN (VALUES {_values(tuple((ua,) for ua in USER_AGENTS))}) AS agent (n, ua)
          ON agent.n = i %% {len(USER_AGENTS)}
        """,
        {"n": count, "users": users},
    )


def refill_expired(url: str, count: int) -> None:
    """Put expired sessions ``0..count-1`` back (presenting one deletes it)."""
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(
            "DELETE FROM sessions WHERE token_hash = ANY(%(h)s)",
            {"h": [hash_token(token("expired", i)) for i in range(count)]},
        )
        users = conn.execute("SELECT count(*) FROM users").fetchone()
        _insert_sessions(conn, "expired", count, users[0] if users else 1)


def filler(url: str, *, total: int, expired: bool) -> int:
    """Add sessions with random tokens until the table holds ``total`` rows; return added.

    With ``expired`` the new rows are already expired (for the cleanup run).
    """
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT count(*) FROM sessions").fetchone()
        have = row[0] if row else 0
        add = max(0, total - have)
        if add:
            expires = "now() - interval '1 day'" if expired else "now() + interval '30 days'"
            conn.execute(
                f"""
                INSERT INTO sessions (user_id, token_hash, expires, created_at,
                                      last_active_at, provider)
                SELECT (SELECT min(id) FROM users) + i %% (SELECT count(*) FROM users),
                       {_sql_hash("gen_random_uuid()::text")}, {expires}, now(), now(), 'email'
                FROM generate_series(1, %(n)s) AS i
                """,
                {"n": add},
            )
            conn.execute("ANALYZE sessions")
    return add


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.seed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("create", help="drop and create the database; print its URL")
    p.add_argument("--admin-url", required=True)
    p.add_argument("--name", required=True)
    p = sub.add_parser("seed", help="users, live and expired sessions")
    p.add_argument("--url", required=True)
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--sessions", type=int, default=100_000)
    p.add_argument("--expired", type=int, default=20_000)
    p.add_argument("--events", type=int, default=30, help="audit events per user")
    p = sub.add_parser("refill-expired", help="put the expired sessions back")
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, required=True)
    p = sub.add_parser("filler", help="top the sessions table up to --total rows")
    p.add_argument("--url", required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--expired", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "create":
        print(create_database(args.admin_url, args.name))
    elif args.command == "seed":
        seed(
            args.url,
            users=args.users,
            sessions=args.sessions,
            expired=args.expired,
            events=args.events,
        )
    elif args.command == "refill-expired":
        refill_expired(args.url, args.count)
    else:
        print(filler(args.url, total=args.total, expired=args.expired))


if __name__ == "__main__":
    main()
