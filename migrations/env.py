"""Alembic environment: runs migrations on the application's engine (Flask-Migrate), or on
the connection ``flask auth migrate`` gives (``config.attributes["connection"]``).

Our revision is recorded in a version table of our own (``schema_upgrade.VERSION_TABLE``),
so that an application's own Alembic history keeps ``alembic_version``; a database that
has ours there from an earlier release has it moved over first.
"""

from __future__ import annotations

from alembic import context
from flask import current_app
from sqlalchemy import Connection

from webapp.storage.db import db
from webapp.storage.schema_upgrade import VERSION_TABLE, move_version_row

config = context.config
target_metadata = db.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=current_app.config["SQLALCHEMY_DATABASE_URI"],
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        version_table=VERSION_TABLE,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # `flask auth migrate` hands over the connection that holds its lock
    # (webapp/storage/schema_upgrade.py).
    given = config.attributes.get("connection")
    if given is not None:
        run_migrations_on(given)
        return
    with db.engine.connect() as connection:
        run_migrations_on(connection)


def run_migrations_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds tables there.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        version_table=VERSION_TABLE,
    )
    with context.begin_transaction():
        move_version_row(connection)
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
