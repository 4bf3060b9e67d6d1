"""The account page's profile: setting the display name, and changing the e-mail address
through a link sent to the new one (webapp/flows/account/profile.py)."""

from __future__ import annotations

import re
from datetime import timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from freezegun import freeze_time

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import Account, AuthEvent, User, VerificationToken

from .support.mail import EmailActions, Mailbox, link_of, text_of
from .support.oauth import email_sign_in
from .support.rows import row_count
from .support.signin import AuthActions

HTMX = {"HX-Request": "true"}
OLD = "ann@example.com"
NEW = "ann.new@example.org"
CHANGE_LINK = re.compile(r"https?://\S+/account/email/confirm\?token=\S+")
LINK_SENT = (
    "A link was sent to {}. Your address changes when you open it, signed in here; until "
    "then it stays as it is."
)
LINK_REFUSED = (
    "The link has expired, was already used or replaced by a newer one, or is not for the "
    "account you are signed in to."
)
IN_USE = "Another account has this e-mail address, so it cannot become yours as well."
INVALID_NAME = "A name can have at most 100 characters, and no control characters."
INVALID_EMAIL = "That is not an e-mail address we can send a message to."


@pytest.fixture
def ann(email_app: Any, mailbox: Mailbox) -> tuple[Any, AuthActions]:
    """An app with e-mail sign-in; Ann signed in by an e-mail link just now (her address is
    verified, her session recent), the mailbox emptied. Returns (app, her actions)."""
    app = email_app()
    actions = AuthActions(app.test_client())
    email_sign_in(actions.client, mailbox, OLD)
    mailbox.reset()
    return app, actions


def _post(actions: AuthActions, path: str, *, htmx: bool = False, **form: Any) -> Any:
    data = {"csrfToken": actions.csrf(), **form}
    return actions.client.post(path, data=data, headers=HTMX if htmx else None)


def _profile(actions: AuthActions) -> str:
    """The profile section of the account page (with any message flashed there)."""
    page = actions.client.get("/account").get_data(as_text=True)
    return page[page.index('<section id="profile"') : page.index('<section id="accounts"')]


def _row(app: Any, email: str = OLD) -> tuple[int, str | None, str | None, bool]:
    """(id, name, address, verified) of the user with ``email``."""
    with app.app_context():
        user = db.session.execute(db.select(User).where(User.email == email)).scalar_one()
        return user.id, user.name, user.email, user.email_verified is not None


def _user(app: Any, user_id: int) -> tuple[str | None, str | None, bool]:
    """(name, address, verified) of user ``user_id``."""
    with app.app_context():
        user = db.session.get(User, user_id)
        assert user is not None
        return user.name, user.email, user.email_verified is not None


def _pending(app: Any) -> list[tuple[int | None, str]]:
    """Every pending change of address: (user id, new address)."""
    with app.app_context():
        rows = db.session.execute(
            db.select(VerificationToken.user_id, VerificationToken.identifier).where(
                VerificationToken.user_id.is_not(None)
            )
        )
        return [(r.user_id, r.identifier) for r in rows]


def _event_types(app: Any, user_id: int) -> list[tuple[str, str | None]]:
    with app.app_context():
        rows = db.session.execute(
            db.select(AuthEvent.type, AuthEvent.error_code)
            .where(AuthEvent.user_id == user_id, AuthEvent.type.like("email.change%"))
            .order_by(AuthEvent.id)
        )
        return [(r.type, r.error_code) for r in rows]


def _change_link(message: EmailMessage) -> str:
    match = CHANGE_LINK.search(text_of(message))
    assert match, text_of(message)
    return match[0]


def _path(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def _token(link: str) -> str:
    return parse_qs(urlsplit(link).query)["token"][0]


def _request_change(actions: AuthActions, mailbox: Mailbox, address: str = NEW) -> str:
    """Ask for a change to ``address`` without JavaScript; return the link mailed there."""
    r = _post(actions, "/account/email", email=address)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    message = mailbox.last()
    assert message["To"] == address
    return _change_link(message)


def _confirm(actions: AuthActions, link: str) -> Any:
    """Press the button of the page the link opens (its token posted)."""
    return _post(actions, "/account/email/confirm", token=_token(link))


# -- the name -------------------------------------------------------------------------------


def test_a_name_is_set_changed_and_cleared_without_javascript(ann):
    app, ann_ = ann
    user_id, name, _, _ = _row(app)
    assert name is None
    assert "No name given" in _profile(ann_)

    r = _post(ann_, "/account/profile/name", name="  Ann   Le\u0301e ")
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    # Trimmed and composed (NFC): "é" as one character.
    assert _user(app, user_id)[0] == "Ann   Lée"
    profile = _profile(ann_)
    assert "Your name is now “Ann   Lée”." in profile and "No name given" not in profile
    assert ann_.client.get("/account/api").json["user"]["name"] == "Ann   Lée"

    _post(ann_, "/account/profile/name", name="Ann Lee")
    assert _user(app, user_id)[0] == "Ann Lee"
    assert 'value="Ann Lee"' in _profile(ann_)

    _post(ann_, "/account/profile/name", name="   ")
    assert _user(app, user_id)[0] is None
    profile = _profile(ann_)
    assert "Your name was removed." in profile and "No name given" in profile


def test_with_htmx_the_name_re_renders_the_profile_in_place(ann):
    app, ann_ = ann
    r = _post(ann_, "/account/profile/name", htmx=True, name="Ann Lee")
    html = r.get_data(as_text=True)
    assert r.status_code == 200
    assert html.lstrip().startswith('<section id="profile"') and "<html" not in html
    assert '<p class="notice notice--success" role="status"' in html
    assert "Your name is now “Ann Lee”." in html and '<p class="profile__name">Ann Lee</p>' in html
    assert _row(app)[1] == "Ann Lee"


@pytest.mark.parametrize(
    "form",
    [
        {"name": "A" * 101},
        {"name": "Ann\x00Lee"},
        {"name": "Ann\nLee"},
        {"name": "Ann\tLee"},
        {"name": "\u202eeeL nnA"},
        {"name": "Ann\u200bLee"},
        {"name": "Ann\ufffdLee"},
        {},
        {"name": ["Ann", "Bob"]},
    ],
    ids=["101-chars", "nul", "newline", "tab", "bidi", "zero-width", "replacement", "none", "two"],
)
def test_a_bad_name_is_refused_and_the_name_stays(ann, form):
    app, ann_ = ann
    _post(ann_, "/account/profile/name", name="Ann")

    r = _post(ann_, "/account/profile/name", htmx=True, **form)
    html = r.get_data(as_text=True)
    assert r.status_code == 200
    assert '<p class="notice notice--error" role="alert"' in html and INVALID_NAME in html
    r = _post(ann_, "/account/profile/name", **form)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert INVALID_NAME in _profile(ann_)
    assert _row(app)[1] == "Ann"


def test_a_name_of_100_characters_is_kept(ann):
    app, ann_ = ann
    _post(ann_, "/account/profile/name", name="A" * 100)
    assert _row(app)[1] == "A" * 100


def test_a_name_without_the_csrf_token_changes_nothing(ann):
    app, ann_ = ann
    r = ann_.client.post("/account/profile/name", data={"name": "Mallory"})
    assert r.status_code == 302 and "error=MissingCSRF" in r.headers["Location"]
    assert _row(app)[1] is None


def test_the_api_sets_and_clears_the_name(ann):
    app, ann_ = ann
    headers = {"X-CSRFToken": ann_.csrf()}
    r = ann_.client.post("/account/api/profile", json={"name": " Ann Lee "}, headers=headers)
    assert (r.status_code, r.json) == (200, {"name": "Ann Lee"})
    assert ann_.client.get("/account/api").json["user"]["name"] == "Ann Lee"
    for body in ({"name": "A" * 101}, {"name": None}, {"name": ["Ann"]}, {}, ["Ann"]):
        r = ann_.client.post("/account/api/profile", json=body, headers=headers)
        assert (r.status_code, r.json) == (400, {"error": "InvalidName", "message": INVALID_NAME})
    assert _row(app)[1] == "Ann Lee"
    r = ann_.client.post("/account/api/profile", json={"name": "Mallory"})
    assert (r.status_code, r.json["error"]) == (400, "MissingCSRF")
    r = ann_.client.post("/account/api/profile", json={"name": ""}, headers=headers)
    assert (r.status_code, r.json) == (200, {"name": None})
    assert _row(app)[1] is None


# -- changing the address ---------------------------------------------------------------------


def test_the_address_changes_only_when_the_link_is_followed(ann, mailbox):
    app, ann_ = ann
    user_id = _row(app)[0]
    link = _request_change(ann_, mailbox)
    message = mailbox.last()
    assert message["Subject"] == "Confirm your new e-mail address at Webapp"
    assert "The link works once and expires in 24 hours" in " ".join(text_of(message).split())
    # Only the link's keyed hash is kept; nothing changed yet, and the page says what waits.
    assert _pending(app) == [(user_id, NEW)]
    with app.app_context():
        stored = db.session.execute(db.select(VerificationToken.token_hash)).scalars().all()
    assert _token(link) not in stored
    assert _user(app, user_id) == (None, OLD, True)
    profile = _profile(ann_)
    assert LINK_SENT.format(NEW) in profile
    waiting = 'A link was sent to <span class="address">ann<wbr>.new<wbr>@example<wbr>.org</span>'
    assert f"{waiting}; it expires <time datetime=" in profile
    assert "Send the link again" in profile and "Cancel the change" in profile

    # Opening the link (as a mail scanner would too) only shows the button.
    page = ann_.client.get(_path(link))
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Confirm your new e-mail address" in html and 'content="no-referrer"' in html
    assert "/language/" not in html
    assert _user(app, user_id) == (None, OLD, True)

    r = _confirm(ann_, link)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert _user(app, user_id) == (None, NEW, True)
    assert _pending(app) == []
    assert f"Your e-mail address is now {NEW}." in _profile(ann_)
    assert ann_.client.get("/auth/session").json["user"]["email"] == NEW
    assert _event_types(app, user_id) == [("email.change_requested", None), ("email.changed", None)]
    # The old e-mail sign-in's row went: a link to the old address no longer finds Ann.
    assert row_count(app, Account, user_id=user_id, provider_account_id=OLD) == 0

    # The old address is told, without naming the new one.
    notice = next(m for m in mailbox.messages if m["To"] == OLD)
    assert notice["Subject"] == "The e-mail address of your Webapp account was changed"
    assert NEW not in text_of(notice) and "http" not in text_of(notice)

    # The link is spent: a second press changes nothing.
    r = _confirm(ann_, link)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert LINK_REFUSED in _profile(ann_)
    assert _user(app, user_id) == (None, NEW, True)

    # A sign-in link to the new address signs Ann in; one to the old one makes a new user.
    other = app.test_client()
    email_sign_in(other, mailbox, NEW)
    assert other.get("/auth/session").json["user"]["email"] == NEW
    stranger = app.test_client()
    email_sign_in(stranger, mailbox, OLD)
    assert _row(app, OLD)[0] != user_id


def test_with_htmx_asking_re_renders_the_profile(ann, mailbox):
    app, ann_ = ann
    r = _post(ann_, "/account/email", htmx=True, email=" Ann.New@EXAMPLE.org ")
    html = r.get_data(as_text=True)
    assert r.status_code == 200 and html.lstrip().startswith('<section id="profile"')
    # Normalised by the one normaliser: the link went to the normal form.
    assert LINK_SENT.format(NEW) in html
    assert mailbox.last()["To"] == NEW
    assert _pending(app) == [(_row(app)[0], NEW)]


@pytest.mark.parametrize("address", ["not-an-address", "ann@", "ann lee@example.com", "", "a@b"])
def test_an_invalid_address_is_refused_and_nothing_is_sent(ann, mailbox, address):
    app, ann_ = ann
    r = _post(ann_, "/account/email", htmx=True, email=address)
    assert r.status_code == 200 and INVALID_EMAIL in r.get_data(as_text=True)
    r = _post(ann_, "/account/email", email=address)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert INVALID_EMAIL in _profile(ann_)
    assert _pending(app) == [] and mailbox.messages == []
    assert _row(app)[2] == OLD


def test_the_current_address_is_no_change(ann, mailbox):
    app, ann_ = ann
    r = _post(ann_, "/account/email", htmx=True, email=OLD.upper())
    assert "That is already your e-mail address." in r.get_data(as_text=True)
    assert _pending(app) == [] and mailbox.messages == []


def test_asking_without_the_csrf_token_changes_nothing(ann, mailbox):
    app, ann_ = ann
    r = ann_.client.post("/account/email", data={"email": NEW})
    assert r.status_code == 302 and "error=MissingCSRF" in r.headers["Location"]
    assert _pending(app) == [] and mailbox.messages == []


def test_asking_needs_a_recent_sign_in(ann, mailbox):
    app, ann_ = ann
    with freeze_time(utcnow() + timedelta(minutes=11)):
        profile = _profile(ann_)
        assert 'name="email"' not in profile
        assert "changing your e-mail address needs a recent sign-in" in profile
        assert "/account/confirm?next=/account%23profile" in profile
        r = _post(ann_, "/account/email", email=NEW)
        assert r.status_code == 303
        assert r.headers["Location"] == "/account/confirm?next=%2Faccount%23profile"
        r = _post(ann_, "/account/email", htmx=True, email=NEW)
        assert r.status_code == 204
        assert r.headers["HX-Redirect"] == "/account/confirm?next=%2Faccount%23profile"
    assert _pending(app) == [] and mailbox.messages == []


def test_an_address_another_user_has_is_refused_only_by_its_link(ann, mailbox, user_factory):
    app, ann_ = ann
    ann_id = _row(app)[0]
    bob = user_factory(app, email=NEW, email_verified=utcnow())
    free = "ann.free@example.org"
    # Asking answers alike whether or not the address is taken: nothing tells who has one.
    answers = []
    for address in (NEW, free):
        r = _post(ann_, "/account/email", email=address)
        notice = re.search(r'<p class="notice[^>]*>([^<]*)</p>', _profile(ann_))
        assert notice is not None
        answers.append((r.status_code, r.headers["Location"], notice[0].replace(address, "…")))
        assert mailbox.last()["To"] == address
    assert answers[0] == answers[1]
    assert LINK_SENT.format("…") in answers[0][2]
    taken = _request_change(ann_, mailbox, NEW)

    r = _confirm(ann_, taken)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert IN_USE in _profile(ann_)
    assert _user(app, ann_id) == (None, OLD, True)
    assert _user(app, bob) == (None, NEW, True)
    assert _pending(app) == [(ann_id, NEW)]
    assert _event_types(app, ann_id)[-1] == ("email.changed", "EmailInUse")


def test_an_address_of_another_user_s_e_mail_sign_in_is_refused(ann, mailbox, account_factory):
    app, ann_ = ann
    ann_id = _row(app)[0]
    with app.app_context():
        bob = User(email=None)
        db.session.add(bob)
        db.session.commit()
        bob_id = bob.id
    account_factory(app, bob_id, provider="email", type="email", provider_account_id=NEW)
    r = _confirm(ann_, _request_change(ann_, mailbox))
    assert r.status_code == 303 and IN_USE in _profile(ann_)
    assert _user(app, ann_id) == (None, OLD, True)


def test_an_expired_link_changes_nothing(ann, mailbox):
    app, ann_ = ann
    ann_id = _row(app)[0]
    start = utcnow()
    with freeze_time(start) as frozen:
        link = _request_change(ann_, mailbox)
        frozen.move_to(start + timedelta(hours=24, seconds=1))
        r = ann_.client.get(_path(link))
        assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
        profile = _profile(ann_)
        assert LINK_REFUSED in profile and "Cancel the change" not in profile
        r = _confirm(ann_, link)
        assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
        assert LINK_REFUSED in _profile(ann_)
    assert _user(app, ann_id) == (None, OLD, True)
    assert [m["To"] for m in mailbox.messages] == [NEW]


def test_a_link_just_before_it_expires_still_works(ann, mailbox):
    app, ann_ = ann
    start = utcnow()
    with freeze_time(start) as frozen:
        link = _request_change(ann_, mailbox)
        frozen.move_to(start + timedelta(hours=24) - timedelta(seconds=1))
        assert _confirm(ann_, link).status_code == 303
        assert _row(app, NEW)[2] == NEW


def test_another_user_s_link_changes_nothing_for_either(ann, mailbox):
    app, ann_ = ann
    ann_id = _row(app)[0]
    link = _request_change(ann_, mailbox)
    bob = AuthActions(app.test_client())
    email_sign_in(bob.client, mailbox, "bob@example.com")
    bob_id = _row(app, "bob@example.com")[0]

    r = bob.client.get(_path(link))
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    r = _confirm(bob, link)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert LINK_REFUSED in _profile(bob)
    assert _user(app, bob_id) == (None, "bob@example.com", True)
    assert _user(app, ann_id) == (None, OLD, True)
    assert _event_types(app, bob_id) == [("email.changed", "EmailChangeLink")] * 2
    # Ann's link was not spent by it.
    assert _confirm(ann_, link).status_code == 303
    assert _user(app, ann_id) == (None, NEW, True)


@pytest.mark.parametrize("tamper", ["last", "empty", "long", "sign-in"])
def test_a_tampered_link_changes_nothing(ann, mailbox, tamper):
    app, ann_ = ann
    link = _request_change(ann_, mailbox)
    token = _token(link)
    if tamper == "sign-in":
        # A sign-in link's token is no change's, though both are e-mail links.
        EmailActions(app.test_client()).request_link(OLD)
        token = parse_qs(urlsplit(link_of(mailbox.last())).query)["token"][0]
    forged = {
        "last": token[:-1] + ("A" if token[-1] != "A" else "B"),
        "empty": "",
        "long": token * 4,
        "sign-in": token,
    }[tamper]
    r = ann_.client.get(f"/account/email/confirm?token={forged}")
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    r = _post(ann_, "/account/email/confirm", token=forged)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    assert LINK_REFUSED in _profile(ann_)
    assert _row(app)[2] == OLD and len(_pending(app)) == 1


def test_following_the_link_signed_out_asks_to_sign_in_first(ann, mailbox):
    app, ann_ = ann
    link = _request_change(ann_, mailbox)
    r = app.test_client().get(_path(link))
    assert r.status_code == 302 and "error=SessionRequired" in r.headers["Location"]
    assert _row(app)[2] == OLD


def test_confirming_without_the_csrf_token_changes_nothing(ann, mailbox):
    app, ann_ = ann
    link = _request_change(ann_, mailbox)
    r = ann_.client.post("/account/email/confirm", data={"token": _token(link)})
    assert r.status_code == 302 and "error=MissingCSRF" in r.headers["Location"]
    assert _row(app)[2] == OLD and len(_pending(app)) == 1


def test_requests_are_throttled_before_any_message(email_app, mailbox):
    app = email_app(EMAIL_ADDRESS_IP_LIMIT="2/10m")
    ann_ = AuthActions(app.test_client())
    email_sign_in(ann_.client, mailbox, OLD)
    mailbox.reset()
    for _ in range(2):
        _request_change(ann_, mailbox)
    r = _post(ann_, "/account/email", htmx=True, email=NEW)
    assert "Too many messages were asked for just now." in r.get_data(as_text=True)
    r = _post(ann_, "/account/email/resend", htmx=True)
    assert "Too many messages were asked for just now." in r.get_data(as_text=True)
    assert len(mailbox.messages) == 2
    with app.app_context():
        throttled = db.session.execute(
            db.select(AuthEvent.type).where(AuthEvent.type == "signin.throttled")
        ).all()
    assert len(throttled) == 1


def test_a_link_that_cannot_be_delivered_leaves_nothing_pending(ann, mailbox):
    app, ann_ = ann
    mailbox.rcpt_reply = "550 No such mailbox"
    r = _post(ann_, "/account/email", htmx=True, email=NEW)
    assert "We could not send the message just now. Nothing was changed." in r.get_data(
        as_text=True
    )
    assert _pending(app) == [] and mailbox.messages == []
    assert _row(app)[2] == OLD


def test_a_new_link_replaces_the_one_before(ann, mailbox):
    app, ann_ = ann
    first = _request_change(ann_, mailbox)
    r = _post(ann_, "/account/email/resend")
    assert (r.status_code, r.headers["Location"]) == (303, "/account#profile")
    again = _change_link(mailbox.last())
    assert mailbox.last()["To"] == NEW and again != first
    assert len(_pending(app)) == 1
    _confirm(ann_, first)
    assert LINK_REFUSED in _profile(ann_)
    _confirm(ann_, again)
    assert _row(app, NEW)[2] == NEW
    # Nothing waits any more: nothing to send again.
    r = _post(ann_, "/account/email/resend", htmx=True)
    assert "No change of e-mail address is waiting." in r.get_data(as_text=True)


def test_a_pending_change_can_be_cancelled(ann, mailbox):
    app, ann_ = ann
    link = _request_change(ann_, mailbox)
    r = _post(ann_, "/account/email/cancel", htmx=True)
    html = r.get_data(as_text=True)
    assert f"The change to {NEW} was cancelled; its link no longer works." in html
    assert "Cancel the change" not in html
    assert _pending(app) == []
    _confirm(ann_, link)
    assert LINK_REFUSED in _profile(ann_)
    assert _row(app)[2] == OLD
    r = _post(ann_, "/account/email/cancel", htmx=True)
    assert "No change of e-mail address is waiting." in r.get_data(as_text=True)


def test_deleting_the_account_takes_its_pending_change(ann, mailbox):
    app, ann_ = ann
    _request_change(ann_, mailbox)
    r = _post(ann_, "/account/delete", confirm="DELETE")
    assert r.status_code == 303
    assert _pending(app) == [] and row_count(app, User) == 0


def test_recent_activity_tells_of_the_change(ann, mailbox):
    _, ann_ = ann
    _confirm(ann_, _request_change(ann_, mailbox))
    page = ann_.client.get("/account").get_data(as_text=True)
    assert "A change of e-mail address was asked for" in page
    assert "E-mail address changed" in page
