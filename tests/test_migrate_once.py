"""``flask auth migrate`` (webapp/storage/schema_upgrade.py): instances starting at the same
moment upgrade a new database exactly once, under an advisory lock held on a direct connection; the
others wait, then find nothing to do. (tests/test_cluster.py: two instances started
together by scripts/serve with MIGRATE_ON_START=true, then serving.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.schema_upgrade import LOCK_KEY

from .support.config import TEST_SECRET, base_config
from .support.databases import create_pg_database, drop_pg_database

PROCESSES = 3
#: Nothing listens on port 1 of loopback: a connection there is refused at once.
REFUSED = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"
#: The newest migration, as Alembic finds it in migrations/.
HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


@pytest.fixture
def new_database() -> Iterator[str]:
    url = create_pg_database("webapp_migrate_once")
    yield url
    drop_pg_database(url)


def _waiting_for_the_lock(conn: sa.Connection) -> int:
    query = sa.text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND ((classid::bigint << 32) | objid::bigint) = :key"
    )
    return int(conn.execute(query, {"key": LOCK_KEY}).scalar_one())


def test_processes_started_together_migrate_a_new_database_once(new_database: str) -> None:
    env = {
        **os.environ,
        "APP_ENV": "production",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "https://example.com/auth",
        "DATABASE_URL": new_database,
    }
    command = [sys.executable, "-m", "flask", "--app", "app", "auth", "migrate"]
    engine = sa.create_engine(new_database, poolclass=sa.pool.NullPool)
    with engine.connect() as holder:
        # Held here until every process is waiting for it, so that they all start at once
        # however long each takes to load the app.
        holder.execute(sa.select(sa.func.pg_advisory_lock(LOCK_KEY)))
        processes = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for _ in range(PROCESSES)
        ]
        deadline = time.monotonic() + 120
        while _waiting_for_the_lock(holder) < PROCESSES:
            assert all(p.poll() is None for p in processes), "a process ended early"
            assert time.monotonic() < deadline, "the processes never all waited for the lock"
            time.sleep(0.2)
    outputs = [p.communicate(timeout=120)[0].decode() for p in processes]
    engine.dispose()
    assert [p.returncode for p in processes] == [0] * PROCESSES, outputs
    migrated = [out for out in outputs if f"migrated the schema from empty to {HEAD}" in out]
    assert len(migrated) == 1, outputs
    steps = len(list(ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()))
    assert migrated[0].count("Running upgrade") == steps
    others = [out for out in outputs if out not in migrated]
    assert all(f"the schema is up to date ({HEAD}); nothing to do" in out for out in others)
    assert not any("Running upgrade" in out for out in others)
    assert all("another instance is migrating the schema: waiting for it" in o for o in outputs)
    with sa.create_engine(new_database, poolclass=sa.pool.NullPool).connect() as conn:
        assert (
            conn.execute(sa.text("SELECT version_num FROM auth_alembic_version")).scalar() == HEAD
        )


def test_behind_a_pooler_the_migrations_run_on_the_direct_url(new_database: str) -> None:
    """DATABASE_URL (the pooler) is unreachable here: everything happens on the direct URL."""
    settings = {"DATABASE_POOLER": "transaction", "DATABASE_DIRECT_URL": new_database}
    runner = create_app(base_config(REFUSED, **settings), environ={}).test_cli_runner()
    first = runner.invoke(args=["auth", "migrate"])
    assert (first.exit_code, first.output) == (0, f"migrated the schema from empty to {HEAD}\n")
    again = runner.invoke(args=["auth", "migrate"])
    assert again.output == f"the schema is up to date ({HEAD}); nothing to do\n"


def test_behind_a_pooler_without_a_direct_url_migrate_refuses() -> None:
    app = create_app(base_config(REFUSED, DATABASE_POOLER="transaction"), environ={})
    result = app.test_cli_runner().invoke(args=["auth", "migrate"])
    assert result.exit_code == 1
    assert "the migrations need DATABASE_DIRECT_URL" in result.output


def test_on_start_migrates_only_when_asked(new_database: str) -> None:
    runner = create_app(base_config(REFUSED), environ={}).test_cli_runner()
    result = runner.invoke(args=["auth", "migrate", "--on-start"])
    assert (result.exit_code, result.output) == (0, "")
    asked = create_app(base_config(new_database, MIGRATE_ON_START="true"), environ={})
    result = asked.test_cli_runner().invoke(args=["auth", "migrate", "--on-start"])
    assert (result.exit_code, result.output) == (0, f"migrated the schema from empty to {HEAD}\n")
