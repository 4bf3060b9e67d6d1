"""E-mail links (docs/email.md, "The link"): scanner-safe landing, single use, 24-hour life,
users and secrets."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from webapp.storage.db import db
from webapp.storage.models import Account, Session, User, VerificationToken

from .support.mail import EmailActions, code_of, link_of
from .support.rows import row_count

VERIFICATION = "http://localhost/auth/error?error=Verification"


@pytest.fixture
def app(email_app):
    return email_app()


@pytest.fixture
def actions(app) -> EmailActions:
    return EmailActions(app.test_client())


def test_get_shows_a_confirmation_page_and_spends_nothing(app, actions, mailbox):
    actions.request_link("ann@example.com")
    link = link_of(mailbox.last())

    page = actions.open_link(link)
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    # The address may wrap before "@" and "." (<wbr>), never inside a part.
    assert '<h1 id="card-title">Sign in as ann<wbr>@example<wbr>.com</h1>' in html
    assert re.search(r'<form method="post" action="/auth/callback/email"', html)
    assert '<meta name="referrer" content="no-referrer">' in html
    assert actions.session_email() is None
    assert row_count(app, VerificationToken) == 1


def test_get_and_head_many_times_then_the_button_still_works(app, actions, mailbox):
    actions.request_link("ann@example.com")
    link = link_of(mailbox.last())
    path_and_query = link.split("http://localhost", 1)[1]
    scanner = app.test_client()
    for _ in range(3):
        assert scanner.get(path_and_query).status_code == 200
        assert scanner.head(path_and_query).status_code == 200
    assert row_count(app, Session) == 0

    r = actions.confirm(link)
    assert r.status_code == 302
    assert actions.session_email() == "ann@example.com"


def test_a_link_works_exactly_once(app, actions, mailbox):
    actions.request_link("ann@example.com")
    link = link_of(mailbox.last())
    first = actions.confirm(link)
    assert first.headers["Location"] == "http://localhost/"

    other = EmailActions(app.test_client())
    again = other.post_link(link)
    assert again.headers["Location"].startswith(VERIFICATION)
    assert other.open_link(link).headers["Location"].startswith(VERIFICATION)
    assert row_count(app, Session) == 1
    assert row_count(app, VerificationToken) == 0


def test_the_link_lives_24_hours_to_the_second(app, mailbox):
    start = datetime.now(UTC).replace(microsecond=0)
    with freeze_time(start) as frozen:
        early, late = EmailActions(app.test_client()), EmailActions(app.test_client())
        early.request_link("ann@example.com")
        early_link = link_of(mailbox.last())
        late.request_link("bob@example.com")
        late_link = link_of(mailbox.last())

        frozen.move_to(start + timedelta(hours=24) - timedelta(seconds=1))
        assert early.confirm(early_link).headers["Location"] == "http://localhost/"
        assert early.session_email() == "ann@example.com"

        frozen.move_to(start + timedelta(hours=24))
        assert late.open_link(late_link).headers["Location"].startswith(VERIFICATION)
        assert late.post_link(late_link).headers["Location"].startswith(VERIFICATION)
        assert late.session_email() is None
        # The expired token was presented, so it is gone rather than left for cleanup.
        assert row_count(app, VerificationToken) == 0


@pytest.mark.parametrize(
    "tamper",
    [
        lambda q: {**q, "token": q["token"][:-1] + ("A" if q["token"][-1] != "A" else "B")},
        lambda q: {**q, "email": "eve@example.com"},
        lambda q: {**q, "token": ""},
        lambda q: {**q, "token": "x" * 500},
        lambda q: {k: v for k, v in q.items() if k != "email"},
    ],
    ids=["token", "email", "empty-token", "huge-token", "no-email"],
)
def test_a_tampered_link_is_verification_and_the_real_one_still_works(
    app, actions, mailbox, tamper
):
    actions.request_link("ann@example.com")
    link = link_of(mailbox.last())
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    bad = tamper(query)
    r = actions.client.post("/auth/callback/email", data={"csrfToken": actions.csrf(), **bad})
    assert r.headers["Location"].startswith(VERIFICATION)
    assert actions.client.get(r.headers["Location"]).status_code == 403
    assert actions.confirm(link).headers["Location"] == "http://localhost/"


def test_first_link_creates_a_verified_user_with_an_email_account(app, actions, mailbox):
    actions.request_link("Ann@Example.com")
    actions.confirm(link_of(mailbox.last()))
    with app.app_context():
        user = db.session.execute(sa.select(User)).scalar_one()
        account = db.session.execute(sa.select(Account)).scalar_one()
        assert user.email == "ann@example.com"
        assert user.email_verified is not None
        assert (account.provider, account.type, account.provider_account_id) == (
            "email",
            "email",
            "ann@example.com",
        )


def test_an_existing_user_gets_a_new_session_and_no_second_user(app, mailbox):
    # Ann's first link creates her, owning the address; an unverified holder made by the
    # demo credentials would not be joined (tests/test_account_hijack.py).
    first = EmailActions(app.test_client())
    first.request_link("ann@example.com")
    first.confirm(link_of(mailbox.last()))
    with app.app_context():
        ann_id = db.session.execute(sa.select(User.id)).scalar_one()
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    actions.confirm(link_of(mailbox.last()))
    with app.app_context():
        users = db.session.execute(sa.select(User)).scalars().all()
        assert [u.id for u in users] == [ann_id]
        assert users[0].email_verified is not None
    assert row_count(app, Session) == 2


def test_another_user_signed_in_in_this_browser_is_signed_out_first(app, client, auth, mailbox):
    auth.signin("bob@example.com")
    bob_cookie = auth.session_cookie()
    actions = EmailActions(client)
    actions.request_link("ann@example.com")
    actions.confirm(link_of(mailbox.last()))
    assert actions.session_email() == "ann@example.com"
    assert auth.session_cookie() != bob_cookie
    with app.app_context():
        emails = (
            db.session.execute(sa.select(User.email).join(Session, Session.user_id == User.id))
            .scalars()
            .all()
        )
    assert emails == ["ann@example.com"]


@pytest.mark.parametrize(
    ("given", "landing"),
    [
        ("/account?tab=sessions", "http://localhost/account?tab=sessions"),
        ("http://localhost/account", "http://localhost/account"),
        ("//evil.example/", "http://localhost/"),
        ("https://evil.example/account", "http://localhost/"),
    ],
)
def test_the_callback_url_travels_safely_through_link_and_code(app, mailbox, given, landing):
    by_link = EmailActions(app.test_client())
    by_link.request_link("ann@example.com", callbackUrl=given)
    message = mailbox.last()
    assert parse_qs(urlsplit(link_of(message)).query)["callbackUrl"] == [landing]
    assert by_link.confirm(link_of(message)).headers["Location"] == landing

    by_code = EmailActions(app.test_client())
    by_code.request_link("bob@example.com", callbackUrl=given)
    assert by_code.enter_code(code_of(mailbox.last())).headers["Location"] == landing


def test_the_database_never_holds_the_token_the_code_or_the_browser_secret(app, actions, mailbox):
    actions.request_link("ann@example.com")
    message = mailbox.last()
    token = parse_qs(urlsplit(link_of(message)).query)["token"][0]
    code = code_of(message)
    browser = actions.client.get_cookie("auth.email-browser", path="/auth").value
    with app.app_context():
        dump = "\n".join(
            repr(tuple(row))
            for table in db.metadata.sorted_tables
            for row in db.session.execute(sa.select(table)).all()
        )
    assert "ann@example.com" in dump  # the dump does see the row
    for secret in (token, code, code.replace("-", ""), browser):
        assert secret not in dump
    # The throttle counters do not list who asked either.
    assert "email-address:ann@" not in dump


def test_known_and_unknown_addresses_get_identical_answers(app, auth, mailbox):
    auth.signin("ann@example.com")  # Ann has an account; Zed does not

    def answer(address):
        client = app.test_client()
        r = EmailActions(client).request_link(address, callbackUrl="/account")
        cookies = sorted(
            re.sub(r"=[^;]*;", "=…;", re.sub(r"Expires=[^;]*", "Expires=…", c))
            for c in r.headers.getlist("Set-Cookie")
        )
        page = client.get(r.headers["Location"])
        html = re.sub(r'name="csrfToken" value="[^"]*"', "", page.get_data(as_text=True))
        return r.status_code, r.headers["Location"], r.get_data(), cookies, page.status_code, html

    assert answer("ann@example.com") == answer("zed@example.com")
    assert len(mailbox.messages) == 2


def test_an_invalid_address_is_email_signin_and_changes_nothing(app, actions, mailbox):
    r = actions.request_link("ann@@example.com", callbackUrl="/account")
    assert r.headers["Location"] == (
        "http://localhost/auth/error?error=EmailSignin&callbackUrl=%2Faccount"
    )
    follow = actions.client.get(r.headers["Location"])
    assert follow.headers["Location"].startswith("http://localhost/auth/signin?error=EmailSignin")
    assert mailbox.messages == []
    for model in (VerificationToken, User):
        assert row_count(app, model) == 0


def test_requesting_a_link_needs_the_csrf_token(app, actions, mailbox):
    r = actions.client.post("/auth/signin/email", data={"email": "ann@example.com"})
    assert r.headers["Location"].endswith("/auth/signin?error=MissingCSRF")
    assert mailbox.messages == []
    assert row_count(app, VerificationToken) == 0


def test_pressing_the_button_needs_the_csrf_token_and_a_failure_spends_nothing(
    app, actions, mailbox
):
    actions.request_link("ann@example.com")
    link = link_of(mailbox.last())
    r = actions.post_link(link, csrf="forged")
    assert r.headers["Location"].endswith("/auth/signin?error=MissingCSRF")
    assert row_count(app, VerificationToken) == 1
    assert actions.confirm(link).headers["Location"] == "http://localhost/"


def test_json_clients_get_the_verify_request_url(actions, mailbox):
    r = actions.request_link("ann@example.com", json="true")
    assert r.status_code == 200
    assert r.json == {"url": "http://localhost/auth/verify-request?provider=email&type=email"}
    assert len(mailbox.messages) == 1


def test_a_confirmation_from_the_account_area_says_what_it_confirms(app, actions, mailbox):
    address = "ann@example.com"
    actions.request_link(address)
    actions.confirm(link_of(mailbox.last()))  # signed in by e-mail: a verified address
    confirm = actions.client.get("/account/confirm", query_string={"next": "/account#delete"})
    assert 'name="purpose" value="delete-account"' in confirm.get_data(as_text=True)
    answer = actions.request_link(address, purpose="delete-account", callbackUrl="/account#delete")
    assert answer.headers["Location"] == (
        "http://localhost/auth/verify-request?provider=email&type=email&purpose=delete-account"
    )
    message = mailbox.last()
    assert message["Subject"] == "Confirm deleting your account at Webapp"
    text = message.get_body(preferencelist=("plain",)).get_content()
    assert f"is deleting the account {address} at Webapp" in text
    assert "asked to sign in" not in text and "Sign out all other sessions" in text
    html = message.get_body(preferencelist=("html",)).get_content()
    assert "Confirm it is you</a>" in html
    page = actions.client.get(answer.headers["Location"]).get_data(as_text=True)
    assert '<h1 id="card-title">Check your e-mail to confirm deleting your account</h1>' in page
    assert "A sign-in link has been sent" not in page
    # A wrong code shows the page again, still saying what it confirms.
    again = actions.client.post(
        "/auth/callback/email",
        data={"csrfToken": actions.csrf(), "code": "ABCD-2345", "purpose": "delete-account"},
    )
    assert again.status_code == 400
    assert "Check your e-mail to confirm deleting your account" in again.get_data(as_text=True)
    # Other changes that need a recent sign-in get the general wording.
    actions.request_link(address, purpose="confirm")
    assert mailbox.last()["Subject"] == "Confirm it is you at Webapp"


def test_only_the_browser_s_own_address_gets_a_confirmation_s_wording(app, actions, mailbox):
    # Nobody can send someone else a message saying their account is being deleted.
    stranger = EmailActions(app.test_client())
    answer = stranger.request_link("ann@example.com", purpose="delete-account")
    assert "purpose" not in answer.headers["Location"]
    assert mailbox.last()["Subject"] == "Sign in to Webapp"
    actions.request_link("bob@example.com")
    actions.confirm(link_of(mailbox.last()))
    actions.request_link("ann@example.com", purpose="delete-account")
    assert mailbox.last()["Subject"] == "Sign in to Webapp"
    actions.request_link("bob@example.com", purpose="anything")
    assert mailbox.last()["Subject"] == "Sign in to Webapp"
