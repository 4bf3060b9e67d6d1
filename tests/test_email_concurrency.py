"""One link, many simultaneous POSTs on PostgreSQL: exactly one session (docs/email.md,
"Opening the link: GET shows, POST spends")."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from flask import Flask

from webapp import create_app
from webapp.storage.db import db
from webapp.storage.models import Session, User, VerificationToken

from .support.config import base_config
from .support.mail import EmailActions, Outbox
from .support.rows import row_count

RACERS = 20


@pytest.fixture
def pg_app(postgres_url: str, outbox: Outbox) -> Iterator[Flask]:
    app = create_app(
        base_config(postgres_url, EMAIL_OUTBOX=str(outbox.folder), DB_POOL_SIZE=str(RACERS)),
        environ={},
    )
    yield app
    with app.app_context():
        db.engine.dispose()


def test_twenty_concurrent_posts_of_one_link_make_exactly_one_session(pg_app, outbox):
    EmailActions(pg_app.test_client()).request_link("ann@example.com")
    link = outbox.last_link()

    # Each racer is its own browser: it opens the link and holds the confirmation form.
    racers = []
    for _ in range(RACERS):
        actions = EmailActions(pg_app.test_client())
        page = actions.open_link(link).get_data(as_text=True)
        racers.append((actions, dict(re.findall(r'name="(\w+)" value="([^"]*)"', page))))

    start = threading.Barrier(RACERS)
    results: list[str] = []

    def press(actions: EmailActions, form: dict[str, str]) -> None:
        start.wait()
        r = actions.client.post("/auth/callback/email", data=form)
        results.append(r.headers["Location"])

    threads = [threading.Thread(target=press, args=racer) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == RACERS
    assert results.count("http://localhost/") == 1
    assert (
        sum(loc.startswith("http://localhost/auth/error?error=Verification") for loc in results)
        == RACERS - 1
    )
    for model, expected in ((Session, 1), (User, 1), (VerificationToken, 0)):
        assert row_count(pg_app, model) == expected
    assert sum(a.session_email() == "ann@example.com" for a, _ in racers) == 1
