"""One-time codes: only in the browser that asked, within the link's life, five wrong tries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from webapp.storage.db import db
from webapp.storage.models import VerificationToken

from .support.mail import EmailActions, code_of, link_of

VERIFICATION = "http://localhost/auth/error?error=Verification"


@pytest.fixture
def app(email_app):
    return email_app()


def attempts(app) -> list[int]:
    with app.app_context():
        return list(db.session.execute(sa.select(VerificationToken.attempts)).scalars())


def wrong(code: str) -> str:
    """A well-formed code that differs from ``code`` in its last character."""
    return code[:-1] + ("2" if code[-1] != "2" else "3")


def test_the_verify_request_page_has_the_code_field(app):
    html = (
        app.test_client()
        .get("/auth/verify-request?provider=email&type=email")
        .get_data(as_text=True)
    )
    assert 'action="/auth/callback/email"' in html
    assert 'name="code"' in html
    assert 'autocomplete="one-time-code"' in html


def test_no_code_form_for_an_unknown_provider_id(app):
    html = (
        app.test_client()
        .get("/auth/verify-request?provider=../signout&type=email")
        .get_data(as_text=True)
    )
    assert 'name="code"' not in html
    assert "callback/../signout" not in html


def test_the_code_works_only_in_the_browser_that_asked(app, mailbox):
    asker, other = EmailActions(app.test_client()), EmailActions(app.test_client())
    asker.request_link("ann@example.com")
    code = code_of(mailbox.last())

    r = other.enter_code(code)
    assert r.headers["Location"].startswith(VERIFICATION)
    assert other.session_email() is None
    assert attempts(app) == [0]

    r = asker.enter_code(code.lower().replace("-", " "))
    assert r.headers["Location"] == "http://localhost/"
    assert asker.session_email() == "ann@example.com"
    # The binding cookie is cleared once used.
    assert asker.client.get_cookie("auth.email-browser", path="/auth") is None


def test_a_code_works_once_and_spends_the_link_too(app, mailbox):
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    message = mailbox.last()
    assert actions.enter_code(code_of(message)).headers["Location"] == "http://localhost/"
    assert actions.enter_code(code_of(message)).headers["Location"].startswith(VERIFICATION)
    other = EmailActions(app.test_client())
    assert other.post_link(link_of(message)).headers["Location"].startswith(VERIFICATION)


def test_five_wrong_tries_burn_the_request(app, mailbox):
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    message = mailbox.last()
    code = code_of(message)

    for left in (4, 3, 2, 1):
        r = actions.enter_code(wrong(code))
        assert r.status_code == 400
        html = r.get_data(as_text=True)
        assert "That code is not right" in html
        assert f"try {left} more time" in html
    assert attempts(app) == [4]

    r = actions.enter_code(wrong(code))
    assert r.headers["Location"].startswith(VERIFICATION)
    assert attempts(app) == []
    # Burnt for good: neither the right code nor the link works any more.
    assert actions.enter_code(code).headers["Location"].startswith(VERIFICATION)
    assert actions.post_link(link_of(message)).headers["Location"].startswith(VERIFICATION)
    assert actions.session_email() is None


def test_the_right_code_on_the_fifth_try_still_works(app, mailbox):
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    code = code_of(mailbox.last())
    for _ in range(4):
        actions.enter_code(wrong(code))
    assert actions.enter_code(code).headers["Location"] == "http://localhost/"


def test_a_malformed_code_is_explained_and_not_counted(app, mailbox):
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    for typo in ("ABC", "ABCD-EFGH-J", "0OIL-1111", ""):
        r = actions.enter_code(typo)
        assert r.status_code == 400
        assert "does not look like a code" in r.get_data(as_text=True)
    assert attempts(app) == [0]


def test_the_code_expires_with_the_link(app, mailbox):
    start = datetime.now(UTC).replace(microsecond=0)
    with freeze_time(start) as frozen:
        actions = EmailActions(app.test_client())
        actions.request_link("ann@example.com")
        code = code_of(mailbox.last())
        frozen.move_to(start + timedelta(hours=24))
        assert actions.enter_code(code).headers["Location"].startswith(VERIFICATION)
        assert actions.session_email() is None


def test_a_newer_request_rebinds_the_browser_to_its_own_code(app, mailbox):
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    first = mailbox.last()
    actions.request_link("ann@example.com")
    second = mailbox.last()
    assert actions.enter_code(code_of(first)).status_code == 400
    assert actions.enter_code(code_of(second)).headers["Location"] == "http://localhost/"
    # The first request's link still works (from any browser).
    other = EmailActions(app.test_client())
    assert other.confirm(link_of(first)).headers["Location"] == "http://localhost/"
