"""Alembic migrations: up and down on both databases, and in step with the models."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask_migrate import downgrade, upgrade

from webapp import MIGRATIONS_DIR, create_app
from webapp.storage.db import db

from .support.config import base_config

TABLES = {"users", "accounts", "sessions", "verification_tokens", "rate_limit_counters"}


def test_there_is_one_head():
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    assert len(script.get_heads()) == 1, script.get_heads()


def test_upgrade_downgrade_upgrade(empty_database):
    app = create_app(base_config(empty_database), environ={})
    with app.app_context():
        upgrade(directory=str(MIGRATIONS_DIR))
        inspector = sa.inspect(db.engine)
        assert TABLES <= set(inspector.get_table_names())
        assert "active_sessions" in inspector.get_view_names()

        downgrade(directory=str(MIGRATIONS_DIR), revision="base")
        inspector = sa.inspect(db.engine)
        assert not TABLES & set(inspector.get_table_names())
        assert "active_sessions" not in inspector.get_view_names()

        upgrade(directory=str(MIGRATIONS_DIR))
        with db.engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"version_table": "auth_alembic_version"}),
                db.metadata,
            )
        # Comments are only kept where the database supports them.
        diff = [d for d in diff if not (isinstance(d, tuple) and "comment" in d[0])]
        assert diff == [], diff
        db.engine.dispose()


def test_schema_constraints_on_the_real_database(app):
    with app.app_context():
        inspector = sa.inspect(db.engine)
        uniques = {
            t: {tuple(u["column_names"]) for u in inspector.get_unique_constraints(t)}
            for t in ("users", "accounts", "sessions")
        }
        # Only a verified address is unique: a partial unique index, no constraint.
        assert ("email",) not in uniques["users"]
        [verified_email] = [
            i for i in inspector.get_indexes("users") if i["name"] == "uq_users_verified_email"
        ]
        assert verified_email["unique"] and verified_email["column_names"] == ["email"]
        where = verified_email["dialect_options"].get(f"{db.engine.dialect.name}_where", "")
        assert "email_verified IS NOT NULL" in str(where)
        assert ("provider", "provider_account_id") in uniques["accounts"]
        assert ("token_hash",) in uniques["sessions"]
        for table in ("accounts", "sessions"):
            [fk] = inspector.get_foreign_keys(table)
            assert fk["referred_table"] == "users"
            assert fk["options"].get("ondelete") == "CASCADE"
        indexed = {tuple(i["column_names"]) for i in inspector.get_indexes("sessions")}
        assert {("user_id",), ("expires",), ("provider", "provider_sid")} <= indexed


def test_postgres_has_comments_and_timestamps_with_time_zone(postgres_url):
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        comment = conn.execute(
            sa.text("SELECT obj_description('sessions'::regclass, 'pg_class')")
        ).scalar()
        assert "SHA-256" in comment
        view_comment = conn.execute(
            sa.text("SELECT obj_description('active_sessions'::regclass, 'pg_class')")
        ).scalar()
        assert "never the token hash" in view_comment
        types = dict(
            conn.execute(
                sa.text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = 'sessions'"
                )
            ).all()
        )
        assert types["expires"] == "timestamp with time zone"
        assert types["created_at"] == "timestamp with time zone"
    engine.dispose()
