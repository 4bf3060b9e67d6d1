"""The account area: its pages and forms (with and without htmx) and its JSON endpoints."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from freezegun import freeze_time

from webapp.clock import utcnow
from webapp.extensions import db
from webapp.models import Account, Session, User

from .helpers import demo_sign_in, row_count

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


def test_an_only_account_can_go_while_e_mail_links_can_sign_in(app, client, auth):
    assert "email" in app.extensions["webapp.providers"]
    auth.signin()
    (account_id,) = _account_ids(app, _user(app).id)
    r = client.post(f"/account/accounts/{account_id}/unlink", data={"csrfToken": auth.csrf()})
    assert r.status_code == 303
    assert _account_ids(app, _user(app).id) == []


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
