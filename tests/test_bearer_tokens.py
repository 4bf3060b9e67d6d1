"""API callers signed in by a provider's access token (``Authorization: Bearer``).

Against the real oidc-provider: opaque tokens checked by introspection (accepted, refused,
cached, the provider down), JWTs it will not introspect (refused and cached, not an
outage), RFC 9068 JWT access tokens checked locally, and the start-up checks of the
configuration. A bearer signs one request in: no session row, no cookie, and it never
opens what needs a browser session (the account pages, stored tokens).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from flask_login import current_user, login_required
from freezegun import freeze_time

from webapp.core.clock import iso_utc
from webapp.settings import ConfigError
from webapp.storage.db import db
from webapp.storage.models import Account, AuthEvent, Session, User

from .support.oauth import API_RESOURCE, APP_ORIGIN, Browser, fake_idp, query_of
from .support.rows import row_count
from .support.servers import free_port

pytestmark = pytest.mark.e2e

REFUSAL = 'Bearer error="invalid_token"'


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def add_api_route(app: Flask) -> None:
    """A ``login_required`` route of the embedding application (before the first request)."""

    @app.get("/api/me")
    @login_required
    def me() -> dict[str, Any]:
        return {"id": current_user.id}


def sign_in_for_token(app: Flask, account: str = "alice") -> tuple[Browser, str]:
    """Sign ``account`` in with op-basic in a fresh browser; return it and the access token
    the app stored for her (read through the app's own token route)."""
    browser = Browser(app.test_client())
    response = browser.sign_in("op-basic", login_hint=account)
    assert response.status_code == 302 and "error" not in query_of(response.headers["Location"])
    answer = browser.client.get("/auth/token/op-basic")
    assert answer.status_code == 200
    return browser, str(answer.json["accessToken"])  # type: ignore[index]


def stored_account(app: Flask, provider: str = "op-basic") -> Account:
    with app.app_context():
        account = db.session.execute(sa.select(Account).filter_by(provider=provider)).scalar_one()
        db.session.expunge(account)
        return account


def user_id_of(app: Flask, email: str) -> int:
    with app.app_context():
        return int(db.session.execute(sa.select(User.id).filter_by(email=email)).scalar_one())


def assert_refused(response: Any) -> None:
    """RFC 6750 §3.1: 401, the challenge naming invalid_token, JSON for the script."""
    assert response.status_code == 401, (response.status_code, response.get_data(as_text=True))
    assert response.headers["WWW-Authenticate"] == REFUSAL
    assert response.json["error"] == "invalid_token"
    assert "Set-Cookie" not in response.headers


def jwt_part(token: str, index: int) -> dict[str, Any]:
    part = token.split(".")[index]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def test_accepted_token_signs_in_one_request_but_opens_no_browser_area(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic", accept_bearer_tokens=True)])
    add_api_route(app)
    _, token = sign_in_for_token(app)
    alice = user_id_of(app, "alice@example.com")
    sessions = row_count(app, Session)
    api: FlaskClient = app.test_client()

    response = api.get("/auth/session", headers=bearer(token))
    assert response.status_code == 200
    # The session's shape; its expiry is the token's, as the provider states it.
    exp = node_op.introspect(token)["exp"]
    assert response.json == {
        "user": {"name": "Alice", "email": "alice@example.com", "image": None},
        "expires": iso_utc(datetime.fromtimestamp(exp, UTC)),
    }
    assert "Set-Cookie" not in response.headers
    assert {"private", "no-store"} <= set(
        response.headers["Cache-Control"].replace(",", " ").split()
    )
    assert row_count(app, Session) == sessions

    # The application's own login_required routes see the token's user.
    response = api.get("/api/me", headers=bearer(token))
    assert response.status_code == 200 and response.json == {"id": alice}
    assert "Set-Cookie" not in response.headers
    assert "no-store" in response.headers["Cache-Control"]
    without = api.get("/api/me")
    assert without.status_code == 302
    location = without.headers["Location"]
    assert location.startswith(APP_ORIGIN + "/auth/signin?")
    assert query_of(location)["error"] == "SessionRequired"
    assert row_count(app, Session) == sessions

    # What rests on a browser session stays closed to a bearer.
    account = api.get("/account", headers=bearer(token))
    assert account.status_code == 302
    assert account.headers["Location"].startswith(APP_ORIGIN + "/auth/signin?")
    stored = api.get("/auth/token/op-basic", headers=bearer(token))
    assert stored.status_code == 401 and stored.json == {"error": "SessionRequired"}


def test_refused_tokens_answer_401_invalid_token(node_op: Any, make_oauth_app: Any) -> None:
    # No cache: each call asks the provider, so the revocation shows at once.
    app = make_oauth_app(
        [node_op.provider_config("op-basic", accept_bearer_tokens=True)],
        AUTH_BEARER_CACHE_TTL="0",
    )
    add_api_route(app)
    _, token = sign_in_for_token(app)
    api = app.test_client()
    assert api.get("/auth/session", headers=bearer(token)).status_code == 200

    garbage = api.get("/auth/session", headers=bearer("not-a-token-anyone-issued"))
    assert_refused(garbage)
    assert garbage.json["requestId"] == garbage.headers["X-Request-ID"]
    # On the application's routes too: a refusal, not a trip to the sign-in page.
    assert_refused(api.get("/api/me", headers=bearer("not-a-token-anyone-issued")))

    refresh = stored_account(app).refresh_token
    assert refresh
    node_op.revoke(refresh)
    assert node_op.introspect(token)["active"] is False
    assert_refused(api.get("/auth/session", headers=bearer(token)))
    assert row_count(app, Session) == 1  # the browser's sign-in only


def test_refresh_token_is_not_a_bearer_token(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic", accept_bearer_tokens=True)])
    sign_in_for_token(app)
    # Alice's refresh token: active, issued to us, and hers; but not an access token.
    refresh = stored_account(app).refresh_token
    assert refresh and node_op.introspect(refresh)["active"] is True
    assert_refused(app.test_client().get("/auth/session", headers=bearer(refresh)))


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ",
        "Bearer",
        "Bearer\tx",
        "Bearer two words",
        "Bearer a,b",
        'Bearer token="quoted"',
        "Bearer t\u00f6ken",
        "Bearer " + "a" * 5000,
    ],
    ids=["empty", "bare", "tab", "spaces", "comma", "quoted", "latin-1", "5000-chars"],
)
def test_malformed_authorization_header_is_refused_not_an_error(
    node_op: Any, make_oauth_app: Any, header: str
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic", accept_bearer_tokens=True)])
    assert_refused(app.test_client().get("/auth/session", headers={"Authorization": header}))


def test_another_clients_token_needs_its_audience_and_a_linked_subject(
    node_op: Any, make_oauth_app: Any
) -> None:
    ours = make_oauth_app([node_op.provider_config("op-basic", accept_bearer_tokens=True)])
    both = make_oauth_app(
        [
            node_op.provider_config(
                "op-basic", accept_bearer_tokens=True, bearer_token_audiences=["op-basic", "op-cli"]
            )
        ]
    )
    sign_in_for_token(both)  # links alice's sub; both apps share the database
    # Alice's token at op-cli, another application of the same provider: active, hers.
    token = node_op.cli_tokens(account="alice")["access_token"]
    answer = node_op.introspect(token)
    assert answer["active"] is True and answer["client_id"] == "op-cli"

    assert_refused(ours.test_client().get("/auth/session", headers=bearer(token)))
    accepted = both.test_client().get("/auth/session", headers=bearer(token))
    assert accepted.status_code == 200
    assert accepted.json["user"]["email"] == "alice@example.com"

    # Carol has a good token for an accepted audience, but never signed in here.
    carol = node_op.cli_tokens(account="carol")["access_token"]
    assert node_op.introspect(carol)["active"] is True
    users = row_count(both, User)
    assert_refused(both.test_client().get("/auth/session", headers=bearer(carol)))
    assert (
        row_count(both, User) == users
        and row_count(both, Account, provider_account_id="carol") == 0
    )


def test_header_is_ignored_when_no_provider_accepts_bearer_tokens(
    node_op: Any, make_oauth_app: Any
) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    response = app.test_client().get("/auth/session", headers=bearer("never-checked"))
    # Checking it would have refused it (401): it was not looked at.
    assert response.status_code == 200 and response.json is None
    assert "WWW-Authenticate" not in response.headers


def test_introspection_answers_are_cached_until_the_ttl(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app(
        [node_op.provider_config("op-basic", accept_bearer_tokens=True)],
        AUTH_BEARER_CACHE_TTL="30",
    )
    _, token = sign_in_for_token(app)
    refresh = stored_account(app).refresh_token
    assert refresh
    api = app.test_client()
    # The clock runs on from the real now: the provider (another process) and the HTTP
    # calls to it are unaffected; only the app's idea of the time jumps.
    with freeze_time(datetime.now(UTC), tick=True) as clock:
        assert api.get("/auth/session", headers=bearer(token)).status_code == 200
        node_op.revoke(refresh)
        assert node_op.introspect(token)["active"] is False

        # Within the TTL the remembered answer stands (the documented trade-off).
        clock.tick(timedelta(seconds=20))
        assert api.get("/auth/session", headers=bearer(token)).status_code == 200

        # Past it the provider is asked again (a 401, not 503: the call went through).
        clock.tick(timedelta(seconds=11))
        assert_refused(api.get("/auth/session", headers=bearer(token)))


def unsigned_jwt(claims: dict[str, Any]) -> str:
    """A JWT with ``alg`` none: anyone can make one, with any claims."""
    parts = ({"alg": "none", "typ": "JWT"}, claims)
    encoded = (base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=") for p in parts)
    return b".".join(encoded).decode() + "."


def test_jwt_shaped_tokens_the_provider_refuses_are_401_and_asked_once_per_ttl(
    node_op: Any, make_oauth_app: Any
) -> None:
    # oidc-provider answers any JWT sent for introspection with 400 unsupported_token_type:
    # a refusal of that token, not an outage.
    app = make_oauth_app(
        [node_op.provider_config("op-basic", accept_bearer_tokens=True, logout="rp-initiated")],
        AUTH_BEARER_CACHE_TTL="30",
    )
    browser, _ = sign_in_for_token(app)
    # The person's own ID token, as the app itself hands it out when she signs out.
    signout = browser.client.post("/auth/signout", data={"csrfToken": browser.csrf()})
    id_token = query_of(signout.headers["Location"])["id_token_hint"]
    claims = jwt_part(id_token, 1)
    assert claims["aud"] == "op-basic" and claims["sub"] == "alice" and "nonce" in claims
    tokens = {"alg=none JWT": unsigned_jwt(claims), "ID token": id_token}
    api = app.test_client()
    repeats = 5
    with freeze_time(datetime.now(UTC), tick=True) as clock:
        for name, token in tokens.items():
            answers = [api.get("/auth/session", headers=bearer(token)) for _ in range(repeats)]
            asked = node_op.introspection_requests(token)
            assert [a.status_code for a in answers] == [401] * repeats, (name, asked)
            for answer in answers:
                assert_refused(answer)
            # Asked once; the refusal is remembered for the TTL.
            assert asked == [
                {"client_id": "op-basic", "status": 400, "error": "unsupported_token_type"}
            ], name

        # Past the TTL the provider is asked again, once.
        clock.tick(timedelta(seconds=31))
        for name, token in tokens.items():
            assert_refused(api.get("/auth/session", headers=bearer(token)))
            assert_refused(api.get("/auth/session", headers=bearer(token)))
            assert len(node_op.introspection_requests(token)) == 2, name


def test_provider_that_cannot_be_asked_answers_503(node_op: Any, make_oauth_app: Any) -> None:
    closed = f"http://127.0.0.1:{free_port()}/token/introspection"
    app = make_oauth_app(
        [
            node_op.provider_config(
                "op-basic", accept_bearer_tokens=True, introspection_endpoint=closed
            )
        ]
    )
    api = app.test_client()
    for _ in range(2):  # an outage is not remembered as a refusal
        response = api.get("/auth/session", headers=bearer("some-opaque-token"))
        assert response.status_code == 503
        assert response.json["error"] == "ProviderUnavailable"
        assert "WWW-Authenticate" not in response.headers


def test_tokens_the_cache_does_not_know_are_counted_per_client_address(
    node_op: Any, make_oauth_app: Any
) -> None:
    # Each made-up token is a request to the provider: a caller sending new ones costs it
    # at most AUTH_BEARER_IP_LIMIT requests, then gets 429; tokens already answered are
    # answered from the cache, and another address has its own allowance.
    app = make_oauth_app(
        [node_op.provider_config("op-basic", accept_bearer_tokens=True)],
        AUTH_BEARER_IP_LIMIT="3/15m",
    )
    api = app.test_client()
    run = uuid.uuid4().hex  # the provider is shared by every test: tokens of this run only
    tokens = [f"made-up-token-{run}-{n}" for n in range(6)]
    answers = [api.get("/auth/session", headers=bearer(t)) for t in tokens]
    for answer in answers[:3]:
        assert_refused(answer)
    for answer in answers[3:]:
        assert answer.status_code == 429
        assert answer.json["error"] == "RateLimited"
    assert [len(node_op.introspection_requests(t)) for t in tokens] == [1, 1, 1, 0, 0, 0]
    assert_refused(api.get("/auth/session", headers=bearer(tokens[0])))  # cached
    assert len(node_op.introspection_requests(tokens[0])) == 1
    # The limit's first refusal in its window is one audit row, not one per request.
    assert row_count(app, AuthEvent, type="signin.throttled") == 1

    elsewhere = {"REMOTE_ADDR": "192.0.2.7"}
    assert_refused(api.get("/auth/session", headers=bearer(tokens[4]), environ_base=elsewhere))
    assert len(node_op.introspection_requests(tokens[4])) == 1


@pytest.mark.parametrize(
    ("status", "answered"),
    [(500, 503), (503, 503), (401, 503), (408, 503), (429, 503), ("stall", 503)]
    + [(400, 401), (403, 401), (404, 401)],
)
def test_only_a_failing_provider_is_an_outage_and_only_refusals_are_cached(
    node_op: Any, make_oauth_app: Any, status: int | str, answered: int
) -> None:
    """A 5xx, 408, 429, no answer in time, or 401 (our client credentials refused, RFC
    7662 §2.3): 503, asked again next time. Any other 4xx refuses the token: 401,
    remembered for the TTL. A fake endpoint: the real OP cannot be made to answer these."""
    with fake_idp() as fake:

        def introspection(request: Any) -> tuple[int, dict[str, str], Any]:
            if status == "stall":
                time.sleep(1)  # past the read timeout below
                return 200, {}, {"active": False}
            assert isinstance(status, int)
            return status, {}, {"error": "invalid_request"}

        fake.routes["/introspect"] = introspection
        endpoint = fake.issuer + "/introspect"
        app = make_oauth_app(
            [
                node_op.provider_config(
                    "op-basic", accept_bearer_tokens=True, introspection_endpoint=endpoint
                )
            ],
            AUTH_BEARER_CACHE_TTL="30",
            AUTH_HTTP_READ_TIMEOUT="0.2",
        )
        api = app.test_client()
        for _ in range(3):
            response = api.get("/auth/session", headers=bearer("some-opaque-token"))
            if answered == 503:
                assert response.status_code == 503
                assert response.json["error"] == "ProviderUnavailable"
                assert "WWW-Authenticate" not in response.headers
            else:
                assert_refused(response)
        assert fake.hits["/introspect"] == (3 if answered == 503 else 1)


@pytest.mark.parametrize(
    ("settings", "extra_answer", "accepted"),
    [
        ({}, {}, False),
        ({"bearer_token_type": "optional"}, {}, False),
        ({"bearer_token_type": "optional", "bearer_subject_claim": "username"}, {}, True),
        (
            {"bearer_token_type": "optional", "bearer_subject_claim": "username"},
            {"token_type": "refresh_token"},
            False,
        ),
        ({"bearer_subject_claim": "username"}, {"token_type": "Bearer"}, True),
    ],
    ids=["defaults", "no-subject-claim", "optional-username", "other-type", "typed-username"],
)
def test_an_answer_without_token_type_or_sub_needs_the_providers_settings(
    node_op: Any,
    make_oauth_app: Any,
    settings: dict[str, str],
    extra_answer: dict[str, str],
    accepted: bool,
) -> None:
    """django-oauth-toolkit's introspection answer has neither ``token_type`` nor ``sub``
    (it names ``username``), both optional in RFC 7662: ``bearer_token_type = "optional"``
    accepts an answer without a type (never one with another type), and
    ``bearer_subject_claim`` names the claim that holds the account's subject. A fake
    endpoint answering as django-oauth-toolkit does (tests/interop runs the real one)."""
    with fake_idp() as fake:
        fake.routes["/introspect"] = lambda request: (200, {}, answer)
        app = make_oauth_app(
            [
                node_op.provider_config(
                    "op-basic",
                    accept_bearer_tokens=True,
                    introspection_endpoint=fake.issuer + "/introspect",
                    **settings,
                )
            ]
        )
        sign_in_for_token(app)
        answer = {
            "active": True,
            "client_id": "op-basic",
            "username": stored_account(app).provider_account_id,
            "scope": "openid",
            "exp": int(time.time()) + 300,
            **extra_answer,
        }
        response = app.test_client().get("/auth/session", headers=bearer("an-opaque-token"))
        if accepted:
            assert response.status_code == 200, response.json
            assert response.json["user"]["email"] == "alice@example.com"
        else:
            assert_refused(response)
        assert fake.hits["/introspect"] == 1


def test_jwt_access_tokens_are_checked_locally(node_op: Any, make_oauth_app: Any) -> None:
    # op-cli is listed too so that the ID token below fails on its typ alone.
    app = make_oauth_app(
        [
            node_op.provider_config(
                "op-basic",
                accept_bearer_tokens=True,
                bearer_tokens="jwt",
                bearer_token_audiences=[API_RESOURCE, "op-cli"],
            )
        ]
    )
    _, opaque = sign_in_for_token(app)  # links alice's sub
    api = app.test_client()
    tokens = node_op.cli_tokens(account="alice", resource=API_RESOURCE)
    access = tokens["access_token"]
    claims = jwt_part(access, 1)
    assert jwt_part(access, 0)["typ"] == "at+jwt" and claims["aud"] == API_RESOURCE

    accepted = api.get("/auth/session", headers=bearer(access))
    assert accepted.status_code == 200
    assert accepted.json == {
        "user": {"name": "Alice", "email": "alice@example.com", "image": None},
        "expires": iso_utc(datetime.fromtimestamp(claims["exp"], UTC)),
    }
    assert "Set-Cookie" not in accepted.headers

    # The same flow's ID token: signed by the same keys, iss and aud fine, but no at+jwt
    # typ (this provider types none of its ID tokens).
    id_token = tokens["id_token"]
    assert "typ" not in jwt_part(id_token, 0) and jwt_part(id_token, 1)["aud"] == "op-cli"
    assert_refused(api.get("/auth/session", headers=bearer(id_token)))

    # A good JWT for the API, but carol never signed in here.
    carol = node_op.cli_tokens(account="carol", resource=API_RESOURCE)["access_token"]
    assert jwt_part(carol, 1)["sub"] == "carol"
    assert_refused(api.get("/auth/session", headers=bearer(carol)))

    # Alice's own opaque token is active at the provider, but nobody here introspects.
    assert node_op.introspect(opaque)["active"] is True
    assert_refused(api.get("/auth/session", headers=bearer(opaque)))

    # One character of the signature changed (mid-signature: every bit of it counts).
    head, payload, signature = access.split(".")
    middle = len(signature) // 2
    flipped = "A" if signature[middle] != "A" else "B"
    tampered = ".".join([head, payload, signature[:middle] + flipped + signature[middle + 1 :]])
    assert_refused(api.get("/auth/session", headers=bearer(tampered)))


def test_two_introspecting_providers_are_a_start_up_error(
    node_op: Any, make_oauth_app: Any
) -> None:
    with pytest.raises(ConfigError, match="only one provider may check bearer tokens"):
        make_oauth_app(
            [
                node_op.provider_config("op-basic", accept_bearer_tokens=True),
                node_op.provider_config("op-post", accept_bearer_tokens=True),
            ]
        )
    # One introspecting and one checking JWTs is fine.
    make_oauth_app(
        [
            node_op.provider_config("op-basic", accept_bearer_tokens=True),
            node_op.provider_config("op-post", accept_bearer_tokens=True, bearer_tokens="jwt"),
        ]
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"bearer_tokens": "jwt"}, "bearer_tokens needs accept_bearer_tokens = true"),
        (
            {"accept_bearer_tokens": True, "bearer_tokens": "nonsense"},
            "bearer_tokens must be introspection or jwt",
        ),
        (
            {"accept_bearer_tokens": True, "bearer_token_audiences": []},
            "bearer_token_audiences must be a list of strings",
        ),
        (
            {"accept_bearer_tokens": True, "bearer_token_audiences": "op-basic"},
            "bearer_token_audiences must be a list of strings",
        ),
        (
            {"bearer_token_type": "optional"},
            "bearer_token_type needs accept_bearer_tokens = true",
        ),
        (
            {"accept_bearer_tokens": True, "bearer_token_type": "sometimes"},
            "bearer_token_type must be required or optional",
        ),
        (
            {"accept_bearer_tokens": True, "bearer_tokens": "jwt", "bearer_token_type": "optional"},
            "bearer_token_type is for bearer_tokens = introspection",
        ),
        (
            {"bearer_subject_claim": "username"},
            "bearer_subject_claim needs accept_bearer_tokens = true",
        ),
        (
            {"accept_bearer_tokens": True, "bearer_subject_claim": " "},
            "bearer_subject_claim must be a non-empty string",
        ),
    ],
    ids=[
        "jwt-without-accept",
        "unknown-mode",
        "no-audiences",
        "audiences-not-a-list",
        "token-type-without-accept",
        "unknown-token-type",
        "token-type-with-jwt",
        "subject-claim-without-accept",
        "empty-subject-claim",
    ],
)
def test_bearer_settings_are_checked_at_start_up(
    node_op: Any, make_oauth_app: Any, extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        make_oauth_app([node_op.provider_config("op-basic", **extra)])


def test_a_plain_oauth_provider_must_name_its_introspection_endpoint(
    node_op: Any, make_oauth_app: Any
) -> None:
    entry = node_op.provider_config(
        "op-basic", accept_bearer_tokens=True, type="oauth", scope="email"
    )
    del entry["issuer"]  # no discovery could name the endpoint
    entry.update(
        {f"{name}_endpoint": f"{node_op.issuer}/{name}" for name in ("authorization", "token")}
    )
    entry["userinfo_endpoint"] = f"{node_op.issuer}/me"
    with pytest.raises(ConfigError, match="introspection_endpoint is required"):
        make_oauth_app([entry])
    entry["introspection_endpoint"] = f"{node_op.issuer}/token/introspection"
    make_oauth_app([entry])
