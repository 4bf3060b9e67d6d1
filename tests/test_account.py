"""The account area: its pages and forms (with and without htmx) and its JSON endpoints."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from freezegun import freeze_time

from webapp.core.clock import utcnow
from webapp.storage.db import db
from webapp.storage.models import Account, Authenticator, Session, User
from webapp.web.account_display import breakable

from .support.oauth import email_sign_in
from .support.rows import add_passkey, row_count
from .support.signin import AuthActions, demo_sign_in

CHROME_UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/156.0.0.0 Safari/537.36"
)
IPHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
HTMX = {"HX-Request": "true"}


def _user(app, email="ann@example.com") -> User:
    with app.app_context():
        user = db.session.execute(db.select(User).where(User.email == email)).scalar_one()
        db.session.expunge(user)
        return user


def _session_ids(app, user_id: int) -> list[int]:
    with app.app_context():
        return list(
            db.session.scalars(
                db.select(Session.id).where(Session.user_id == user_id).order_by(Session.id)
            )
        )


@pytest.fixture
def second_browser(app, auth):
    """Sign ann in here and in a second client (another browser); return that client."""
    auth.client.environ_base["HTTP_USER_AGENT"] = CHROME_UA
    auth.signin()
    other = app.test_client()
    other.environ_base["HTTP_USER_AGENT"] = IPHONE_UA
    demo_sign_in(other)
    return other


def test_signed_out_visitors_go_to_sign_in(client):
    r = client.get("/account")
    assert r.status_code == 302
    assert "/auth/signin?error=SessionRequired" in r.headers["Location"]


def test_overview_shows_profile_methods_and_devices(client, auth, second_browser):
    page = client.get("/account").get_data(as_text=True)
    assert "ann@example.com" in page
    assert "Demo account (development only)" in page
    assert "Chrome 156 on Linux" in page
    assert "Mobile Safari 17 on iPhone" in page
    # Exactly one row is this browser's.
    assert page.count('<span class="badge">this device</span>') == 1
    assert re.search(r'<tr class="current">\s*<th scope="row" data-label="Device">Chrome', page)


@pytest.fixture
def without_email(app):
    """The app with e-mail sign-in not offered (it is on by default in development)."""
    app.extensions["webapp.providers"].pop("email", None)


NO_METHOD = "No sign-in method is linked"


def _verify_address(app, email="ann@example.com") -> None:
    """Mark the user's address proven, as an e-mail link or a verified provider would."""
    with app.app_context():
        user = db.session.execute(db.select(User).where(User.email == email)).scalar_one()
        user.email_verified = utcnow()
        db.session.commit()


def test_an_only_account_can_go_while_e_mail_links_can_sign_in(app, client, auth):
    assert "email" in app.extensions["webapp.providers"]
    auth.signin()
    _verify_address(app)
    (account_id,) = _account_ids(app, _user(app).id)
    page = client.get("/account").get_data(as_text=True)
    assert f"/account/accounts/{account_id}/unlink" in page
    r = client.post(f"/account/accounts/{account_id}/unlink", data={"csrfToken": auth.csrf()})
    assert r.status_code == 303
    assert _account_ids(app, _user(app).id) == []
    # The card still lists the way in that is left, never "no method".
    page = client.get("/account").get_data(as_text=True)
    assert "a link or code sent to" in page and "ann<wbr>@example<wbr>.com" in page
    assert NO_METHOD not in page


def test_an_unverified_address_is_no_way_in(app, client, auth):
    # The demo hook does not vouch for the address: an e-mail link to it would sign in a
    # new user of its own, not this one, so the demo account is the only way in.
    assert "email" in app.extensions["webapp.providers"]
    auth.signin()
    (account_id,) = _account_ids(app, _user(app).id)
    page = client.get("/account").get_data(as_text=True)
    assert "/unlink" not in page and "a link or code sent to" not in page
    assert "This is your only way to sign in, so it cannot be removed." in page
    r = _api_post(client, auth, f"/accounts/{account_id}/unlink")
    assert (r.status_code, r.json["error"]) == (409, "LastSignInMethod")
    assert client.get("/account/api").json["accounts"][0]["removable"] is False
    assert _account_ids(app, _user(app).id) == [account_id]


def test_the_last_sign_in_method_cannot_be_removed(app, client, auth, without_email):
    auth.signin()
    user = _user(app)
    (account_id,) = _account_ids(app, user.id)
    page = client.get("/account").get_data(as_text=True)
    assert "/unlink" not in page
    assert "only way to sign in" in page
    r = client.post(
        f"/account/accounts/{account_id}/unlink", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert "is your only way to sign in" in r.get_data(as_text=True)
    assert row_count(app, Account, user_id=user.id) == 1


def _account_ids(app, user_id: int) -> list[int]:
    with app.app_context():
        return list(db.session.scalars(db.select(Account.id).where(Account.user_id == user_id)))


# E-mail sign-in: a way in that comes with the verified address -------------------------------

EVE = "eve@example.com"


@pytest.fixture
def eve(email_app, mailbox):
    """An app with e-mail sign-in; Eve signed in there by e-mail link (her address is
    verified, and the sign-in wrote an ``email`` account row). Returns (app, her actions)."""
    app = email_app()
    actions = AuthActions(app.test_client())
    email_sign_in(actions.client, mailbox, EVE)
    return app, actions


def _email_row(app) -> int:
    with app.app_context():
        return db.session.execute(
            db.select(Account.id).where(
                Account.provider == "email", Account.provider_account_id == EVE
            )
        ).scalar_one()


def test_e_mail_sign_in_is_listed_as_a_way_in_with_nothing_to_remove(eve):
    app, eve_ = eve
    row = _email_row(app)
    page = eve_.client.get("/account").get_data(as_text=True)
    assert "<strong>E-mail</strong>" in page and "eve<wbr>@example<wbr>.com" in page
    assert "comes with your verified address, so it cannot be removed" in page
    assert f"/account/accounts/{row}/unlink" not in page
    assert NO_METHOD not in page and "only way to sign in" not in page
    body = eve_.client.get("/account/api").json
    assert [(a["provider"], a["removable"]) for a in body["accounts"]] == [("email", False)]


def test_a_crafted_request_cannot_remove_e_mail_sign_in(eve):
    app, eve_ = eve
    row = _email_row(app)
    path = f"/account/accounts/{row}/unlink"
    refusal = f"E-mail sign-in comes with your verified address ({EVE}), so it cannot be removed."
    r = eve_.client.post(path, data={"csrfToken": eve_.csrf()}, headers=HTMX)
    assert r.status_code == 200
    assert '<p class="notice notice--error" role="alert"' in r.get_data(as_text=True)
    assert refusal in r.get_data(as_text=True)
    r = eve_.client.post(path, data={"csrfToken": eve_.csrf()})
    assert (r.status_code, r.headers["Location"]) == (303, "/account#accounts")
    assert refusal in eve_.client.get("/account").get_data(as_text=True)
    r = _api_post(eve_.client, eve_, path.removeprefix("/account"))
    assert (r.status_code, r.json["error"]) == (409, "EmailSignInKept")
    assert refusal in r.json["message"]
    # Nor does the step page a confirmation returns to offer it: back to the card.
    r = eve_.client.get(path)
    assert (r.status_code, r.headers["Location"]) == (303, "/account#accounts")
    assert row_count(app, Account, id=row) == 1


def test_e_mail_sign_in_stays_listed_without_its_row(eve, mailbox):
    # The row is a record of the first e-mail sign-in, not what lets the next one in: a
    # link to the verified address signs Eve in, row or not, and writes the row again.
    app, eve_ = eve
    with app.app_context():
        db.session.execute(db.delete(Account).where(Account.provider == "email"))
        db.session.commit()
    page = eve_.client.get("/account").get_data(as_text=True)
    assert "a link or code sent to" in page and NO_METHOD not in page
    other = app.test_client()
    email_sign_in(other, mailbox, EVE)
    assert other.get("/auth/session").json["user"]["email"] == EVE
    assert row_count(app, User) == 1 and row_count(app, Account, provider="email") == 1


def test_a_provider_can_go_while_e_mail_sign_in_stays(eve, account_factory):
    app, eve_ = eve
    user_id = _user(app, EVE).id
    github = account_factory(app, user_id)
    page = eve_.client.get("/account").get_data(as_text=True)
    assert f"/account/accounts/{github}/unlink" in page
    assert f"/account/accounts/{_email_row(app)}/unlink" not in page
    r = eve_.client.post(
        f"/account/accounts/{github}/unlink", data={"csrfToken": eve_.csrf()}, headers=HTMX
    )
    assert "github was removed from your sign-in methods." in r.get_data(as_text=True)
    assert _account_ids(app, user_id) == [_email_row(app)]


def test_passkeys_are_listed_as_a_way_in(app, client, auth, without_email):
    auth.signin()
    user = _user(app)
    with app.app_context():
        db.session.execute(db.delete(Account).where(Account.user_id == user.id))
        db.session.add(
            Authenticator(
                user_id=user.id,
                credential_id="cred-1",
                public_key="key",
                sign_count=0,
                backed_up=True,
                device_type="multi_device",
                name="Phone",
            )
        )
        db.session.commit()
    page = client.get("/account").get_data(as_text=True)
    assert "<strong>Passkeys</strong>" in page and "1 passkey," in page
    assert NO_METHOD not in page


def test_no_method_is_said_only_when_none_works(app, client, auth, without_email):
    auth.signin()
    with app.app_context():
        db.session.execute(db.delete(Account))
        db.session.commit()
    page = client.get("/account").get_data(as_text=True)
    assert f"{NO_METHOD}: after signing out you could not sign in again." in page


def test_an_address_breaks_between_its_parts_only():
    assert breakable("ann.lee@mail.example-co.uk") == (
        'ann<wbr>.lee<wbr>@mail<wbr>.example<wbr><span class="nobr">-c</span>o<wbr>.uk'
    )
    assert breakable("<b>@x") == "&lt;b&gt;<wbr>@x"
    assert breakable(None) == "" and breakable("-") == "-"


def test_unlink_with_htmx_returns_the_section(app, client, auth, account_factory):
    auth.signin()
    user = _user(app)
    github = account_factory(app, user.id)
    r = client.post(
        f"/account/accounts/{github}/unlink", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    html = r.get_data(as_text=True)
    assert r.status_code == 200
    assert html.lstrip().startswith('<section id="accounts"')
    assert "github was removed from your sign-in methods." in html
    assert "<html" not in html
    assert _account_ids(app, user.id) != [] and github not in _account_ids(app, user.id)


def test_remove_asks_first_on_a_page_of_its_own_without_javascript(
    app, client, auth, account_factory
):
    auth.signin()
    user = _user(app)
    github = account_factory(app, user.id)
    passkey = add_passkey(app, user.id, synced=False)
    page = client.get("/account").get_data(as_text=True)
    # "Remove" only leads to the question: a GET, nothing removed by it.
    assert f'<form method="get" action="/account/accounts/{github}/unlink"' in page
    assert f'<form method="get" action="/account/passkeys/{passkey}/remove"' in page
    asked = client.get(f"/account/accounts/{github}/unlink").get_data(as_text=True)
    assert '<h1 id="card-title">Remove github?</h1>' in asked
    assert f'<form method="post" action="/account/accounts/{github}/unlink"' in asked
    assert "Yes, remove github" in asked and 'href="/account#accounts"' in asked
    assert "hx-post" not in asked and "language" in asked
    asked = client.get(f"/account/passkeys/{passkey}/remove").get_data(as_text=True)
    assert '<h1 id="card-title">Remove the passkey “Phone”?</h1>' in asked
    assert f'<form method="post" action="/account/passkeys/{passkey}/remove"' in asked
    assert github in _account_ids(app, user.id)


def test_remove_asks_in_place_with_htmx(app, client, auth, account_factory):
    auth.signin()
    github = account_factory(app, _user(app).id)
    asked = client.get(f"/account/accounts/{github}/unlink", headers=HTMX)
    html = asked.get_data(as_text=True)
    assert asked.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<div class="confirm-step" role="group"')
    assert "data-focus-after-swap>Remove github?</p>" in html
    assert f'hx-post="/account/accounts/{github}/unlink" hx-target="#accounts"' in html
    assert "data-dismiss>Cancel</a>" in html


def test_what_is_not_the_person_s_to_remove_is_not_asked_about(app, client, auth, account_factory):
    demo_sign_in(app.test_client(), "bob@example.com")
    bob = _user(app, "bob@example.com")
    bob_passkey = add_passkey(app, bob.id, synced=False)
    auth.signin()
    r = client.get(f"/account/passkeys/{bob_passkey}/remove")
    assert (r.status_code, r.headers["Location"]) == (303, "/account#passkeys")
    r = client.get(f"/account/passkeys/{bob_passkey}/remove", headers=HTMX)
    assert (r.status_code, r.headers["HX-Redirect"]) == (204, "/account#passkeys")


@pytest.mark.parametrize("removed", ["account", "passkey"])
def test_a_removal_with_htmx_re_renders_every_section_that_counts_the_ways_in(
    app, client, auth, account_factory, without_email, removed
):
    auth.signin()
    user = _user(app)
    (demo,) = _account_ids(app, user.id)
    passkey = add_passkey(app, user.id, synced=False)
    path = (
        f"/account/accounts/{demo}/unlink"
        if removed == "account"
        else f"/account/passkeys/{passkey}/remove"
    )
    html = client.post(path, data={"csrfToken": auth.csrf()}, headers=HTMX).get_data(as_text=True)
    target, others = ("accounts", "passkeys") if removed == "account" else ("passkeys", "accounts")
    assert html.lstrip().startswith(f'<section id="{target}" class="panel"')
    for section in (others, "two-factor"):
        opening = f'<section id="{section}" class="panel" aria-labelledby="{section}-title"'
        assert f'{opening} hx-swap-oob="true">' in html
    # What is left is the last way in: nothing offers to remove it any more.
    assert "/unlink" not in html and "/remove" not in html


def test_unlink_as_a_plain_form_redirects_with_the_message(app, client, auth, account_factory):
    auth.signin()
    user = _user(app)
    github = account_factory(app, user.id)
    r = client.post(f"/account/accounts/{github}/unlink", data={"csrfToken": auth.csrf()})
    assert r.status_code == 303
    assert r.headers["Location"] == "/account#accounts"
    page = client.get("/account").get_data(as_text=True)
    assert "github was removed from your sign-in methods." in page


def test_another_users_account_or_session_is_not_found(app, client, auth, account_factory):
    demo_sign_in(app.test_client(), "bob@example.com")  # in another browser
    bob = _user(app, "bob@example.com")
    bob_github = account_factory(app, bob.id)
    (bob_session,) = _session_ids(app, bob.id)
    auth.signin("ann@example.com")
    r = client.post(
        f"/account/accounts/{bob_github}/unlink", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert "not linked to your account" in r.get_data(as_text=True)
    r = client.post(
        f"/account/sessions/{bob_session}/end", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert "already ended" in r.get_data(as_text=True)
    assert row_count(app, Account, id=bob_github) == 1
    assert _session_ids(app, bob.id) == [bob_session]


@pytest.mark.parametrize("row_id", ["0", "9223372036854775808", "99999999999999999999999"])
def test_ids_no_row_can_have_are_not_found_and_change_nothing(app, client, auth, row_id):
    # Beyond BIGINT, PostgreSQL could not bind the id and the answer was a 500.
    auth.signin("ann@example.com")
    token = auth.csrf()
    for method, path, headers in [
        ("POST", f"/account/sessions/{row_id}/end", {}),
        ("POST", f"/account/accounts/{row_id}/unlink", {}),
        ("GET", f"/account/accounts/{row_id}/unlink", {}),
        ("POST", f"/account/api/sessions/{row_id}/end", {"X-CSRFToken": token}),
        ("POST", f"/account/api/accounts/{row_id}/unlink", {"X-CSRFToken": token}),
    ]:
        r = client.open(path, method=method, data={"csrfToken": token}, headers=headers)
        assert r.status_code in (404, 405), (method, path, r.status_code)
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"
    assert row_count(app, Account) == 1 and row_count(app, Session) == 1


def test_ending_another_session_signs_that_browser_out(app, client, auth, second_browser):
    user = _user(app)
    mine, theirs = _session_ids(app, user.id)
    r = client.post(
        f"/account/sessions/{theirs}/end", data={"csrfToken": auth.csrf()}, headers=HTMX
    )
    assert "That session was signed out." in r.get_data(as_text=True)
    # The section is read again inside the request's transaction: the change shows.
    assert f"/account/sessions/{theirs}/end" not in r.get_data(as_text=True)
    assert f"/account/sessions/{mine}/end" in r.get_data(as_text=True)
    assert _session_ids(app, user.id) == [mine]
    assert second_browser.get("/auth/session").json is None
    assert client.get("/auth/session").json["user"]["email"] == "ann@example.com"


def test_ending_this_session_leaves_the_account_area(app, client, auth):
    auth.signin()
    (mine,) = _session_ids(app, _user(app).id)
    r = client.post(f"/account/sessions/{mine}/end", data={"csrfToken": auth.csrf()}, headers=HTMX)
    assert r.status_code == 204
    assert r.headers["HX-Redirect"] == "/"
    assert client.get("/auth/session").json is None


def test_sign_out_all_other_sessions(app, client, auth, second_browser):
    user = _user(app)
    mine = _session_ids(app, user.id)[0]
    r = client.post("/account/sessions/end-others", data={"csrfToken": auth.csrf()})
    assert r.status_code == 303
    assert _session_ids(app, user.id) == [mine]
    assert "Signed out 1 other session." in client.get("/account").get_data(as_text=True)
    assert second_browser.get("/account").status_code == 302


def test_account_forms_need_the_csrf_token(app, client, auth, second_browser):
    user = _user(app)
    before = _session_ids(app, user.id)
    r = client.post("/account/sessions/end-others", data={})
    assert r.status_code == 302
    assert "error=MissingCSRF" in r.headers["Location"]
    r = client.post("/account/delete", data={"confirm": "DELETE"})
    assert "error=MissingCSRF" in r.headers["Location"]
    assert _session_ids(app, user.id) == before
    assert row_count(app, User) == 1


def test_delete_needs_the_typed_confirmation(app, client, auth):
    auth.signin()
    r = client.post(
        "/account/delete", data={"csrfToken": auth.csrf(), "confirm": "yes"}, headers=HTMX
    )
    assert "Type DELETE to confirm." in r.get_data(as_text=True)
    assert row_count(app, User) == 1


def test_delete_needs_a_recent_sign_in(app, client, auth):
    auth.signin()
    with freeze_time(utcnow() + timedelta(minutes=11)):
        page = client.get("/account").get_data(as_text=True)
        assert "needs a recent sign-in (in the last 10 minutes)" in page
        assert 'name="confirm"' not in page
        r = client.post(
            "/account/delete", data={"csrfToken": auth.csrf(), "confirm": "DELETE"}, headers=HTMX
        )
        # Sent to confirm it is them, then back to the delete form.
        assert r.headers["HX-Redirect"] == "/account/confirm?next=%2Faccount%23delete"
    assert row_count(app, User) == 1


def test_delete_removes_the_user_and_everything_linked(
    app, client, auth, second_browser, account_factory
):
    user = _user(app)
    account_factory(app, user.id)
    demo_sign_in(app.test_client(), "bob@example.com")  # someone else's data stays
    r = client.post("/account/delete", data={"csrfToken": auth.csrf(), "confirm": "DELETE"})
    assert r.status_code == 303
    assert r.headers["Location"] == "/"
    assert row_count(app, User, id=user.id) == 0
    assert row_count(app, Account, user_id=user.id) == 0
    assert row_count(app, Session, user_id=user.id) == 0
    assert row_count(app, User) == 1
    assert second_browser.get("/auth/session").json is None
    assert "Your account and everything linked to it were deleted." in client.get("/").get_data(
        as_text=True
    )


# The JSON endpoints -------------------------------------------------------------------------


def _api_post(client, auth, path, body=None):
    return client.post(f"/account/api{path}", json=body or {}, headers={"X-CSRFToken": auth.csrf()})


def test_api_needs_a_session(client):
    r = client.get("/account/api")
    assert r.status_code == 401
    assert r.json == {"error": "SessionRequired"}


def test_api_overview(app, client, auth, second_browser, without_email):
    r = client.get("/account/api")
    assert r.status_code == 200
    assert r.headers["Cache-Control"] == "private, no-cache, no-store"
    body = r.json
    assert body["user"]["email"] == "ann@example.com"
    assert [a["provider"] for a in body["accounts"]] == ["demo"]
    assert body["canUnlink"] is False
    assert sorted(s["device"] for s in body["sessions"]) == [
        "Chrome 156 on Linux",
        "Mobile Safari 17 on iPhone",
    ]
    assert [s["current"] for s in body["sessions"]].count(True) == 1
    assert body["recentlySignedIn"] is True
    assert body["sessions"][0]["createdAt"].endswith("Z")


def test_api_posts_need_the_csrf_header(app, client, auth, second_browser):
    r = client.post("/account/api/sessions/end-others", json={})
    assert r.status_code == 400
    assert r.json == {"error": "MissingCSRF"}
    assert len(_session_ids(app, _user(app).id)) == 2


def test_api_refusals_have_codes(app, client, auth, without_email):
    auth.signin()
    (account_id,) = _account_ids(app, _user(app).id)
    r = _api_post(client, auth, f"/accounts/{account_id}/unlink")
    assert (r.status_code, r.json["error"]) == (409, "LastSignInMethod")
    assert client.get("/account/api").json["accounts"][0]["removable"] is False
    r = _api_post(client, auth, "/sessions/999999/end")
    assert (r.status_code, r.json["error"]) == (404, "NotFound")
    r = _api_post(client, auth, "/delete", {"confirm": "nope"})
    assert (r.status_code, r.json["error"]) == (400, "ConfirmationRequired")
    with freeze_time(utcnow() + timedelta(minutes=11)):
        r = _api_post(client, auth, "/delete", {"confirm": "DELETE"})
    assert (r.status_code, r.json["error"]) == (403, "RecentSignInRequired")
    assert row_count(app, User) == 1


def test_api_actions(app, client, auth, second_browser, account_factory):
    user = _user(app)
    github = account_factory(app, user.id)
    assert _api_post(client, auth, f"/accounts/{github}/unlink").json == {"unlinked": github}
    assert _api_post(client, auth, "/sessions/end-others").json == {"ended": 1}
    (mine,) = _session_ids(app, user.id)
    r = _api_post(client, auth, f"/sessions/{mine}/end")
    assert r.json == {"ended": mine, "signedOut": True}
    assert client.get("/account/api").status_code == 401


def test_api_delete(app, client, auth):
    auth.signin()
    assert _api_post(client, auth, "/delete", {"confirm": "DELETE"}).json == {"deleted": True}
    assert row_count(app, User) == 0
