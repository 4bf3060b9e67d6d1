"""Single sign-on chosen by the e-mail domain (docs/how-to/sso-by-domain.md): the
``domains`` and ``enforce_domain`` fields, the e-mail form sending an address to its
provider, the refusals of every other way in, and joining existing users once (with
``flask auth sso list`` and ``undo``).

The provider is the test OpenID Provider (oidc-provider, tests/op/server.mjs), started for
this module with two more accounts keyed by their addresses: the "Continue with" form sends
the address as ``login_hint``, which picks the account there. One join goes through
SimpleSAMLphp (the ``simplesamlphp`` fixture) as a SAML provider.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlsplit

import pytest
import sqlalchemy as sa
from flask import Flask

from webapp.core.email_domains import DomainRule
from webapp.core.hooks import AuthHooks, UserInfo
from webapp.settings import ConfigError
from webapp.storage.db import db
from webapp.storage.models import (
    Account,
    AuthEvent,
    Session,
    SsoJoin,
    User,
    VerificationToken,
)

from .saml.signin_steps import post_response, start
from .saml.simplesamlphp import SP_ID
from .saml.static_idp import idp_metadata_file
from .support import oauth as op_support
from .support.config import started
from .support.mail import EmailActions, Mailbox, code_of, link_of
from .support.oauth import Browser, NodeOP, error_of, query_of
from .support.passkey_ceremonies import Passkeys
from .support.rows import row_count

pytestmark = pytest.mark.e2e

ANN = "ann@acme.example"
#: Eve claims an Acme address at a provider that does not verify it.
EVE = "eve@acme.example"
#: SimpleSAMLphp's Eve, at a subdomain.
EU_EVE = "eve@eu.acme.example"
#: The OP's accounts for them, keyed by their addresses (the login_hint the form sends).
ACME_ACCOUNTS = {
    ANN: {"email": ANN, "email_verified": True, "name": "Ann at Acme"},
    EVE: {"email": EVE, "email_verified": False, "name": "Eve"},
}

PASSWORD_FIELDS = [
    {"name": "email", "label": "E-mail", "type": "email"},
    {"name": "password", "label": "Password", "type": "password"},
]


class AcmeOP(NodeOP):
    """The test OpenID Provider with Ann's and Eve's accounts added to the shared ones (for
    this instance's configuration only: the dict is restored once it is written)."""

    def start(self) -> None:
        with mock.patch.dict(op_support.ACCOUNTS, ACME_ACCOUNTS):
            super().start()


@pytest.fixture(scope="module")
def acme_op(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcmeOP]:
    yield from started(AcmeOP(tmp_path_factory.mktemp("acme-op")))


def acme(op: NodeOP, **extra: Any) -> dict[str, Any]:
    """Acme's provider (the OP's op-basic client), declared for acme.example."""
    return op.provider_config(
        "op-basic", name="Acme staff", **{"domains": ["acme.example"], **extra}
    )


@pytest.fixture
def sso_app(
    make_oauth_app: Callable[..., Flask], acme_op: AcmeOP, mailbox: Mailbox
) -> Callable[..., Flask]:
    """``sso_app(enforce=…, **settings)``: e-mail sign-in through ``mailbox``, Acme's provider,
    another provider of the same OP (op-post), and with ``hooks`` a password form."""

    def factory(*, enforce: bool = False, **settings: Any) -> Flask:
        entries = [
            {"id": "email", "type": "email"},
            acme(acme_op, enforce_domain=enforce),
            acme_op.provider_config("op-post", name="Other"),
        ]
        if "hooks" in settings:
            entries.append({"id": "password", "type": "credentials", "fields": PASSWORD_FIELDS})
        return make_oauth_app(entries, EMAIL_SERVER=mailbox.url(), EMAIL_TIMEOUT="5", **settings)

    return factory


def rows(app: Flask, model: Any) -> list[Any]:
    with app.app_context():
        found = list(db.session.scalars(sa.select(model)))
        db.session.expunge_all()
        return found


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"domains": ["acme"]}, "provider 'corp': domains: 'acme' is not a domain name"),
        *(
            ({"domains": [bad]}, f"provider 'corp': domains: {bad!r} is not a domain name")
            for bad in ("*.acme", "*acme.example", "*.*.acme.example", "eu.*.acme.example")
        ),
        ({"domains": "acme.example"}, "provider 'corp': domains must be a list"),
        ({"enforce_domain": True}, "provider 'corp': enforce_domain needs domains"),
        (
            {"domains": ["acme.example"], "enforce_domain": "yes"},
            "provider 'corp': enforce_domain must be true or false",
        ),
    ],
)
def test_a_mistake_in_the_domain_fields_stops_start_up(
    make_oauth_app: Callable[..., Flask], changes: dict[str, Any], message: str
) -> None:
    entry = {
        "id": "corp",
        "type": "oidc",
        "issuer": "https://sso.example.com",
        "client_id": "webapp",
        "client_secret": "s3cret",
        **changes,
    }
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        make_oauth_app([entry])


def test_a_domain_two_providers_declare_stops_start_up(
    make_oauth_app: Callable[..., Flask], tmp_path: Path
) -> None:
    oidc = {
        "id": "corp",
        "type": "oidc",
        "issuer": "https://sso.example.com",
        "client_id": "webapp",
        "client_secret": "s3cret",
        "domains": ["acme.example"],
    }
    metadata = idp_metadata_file(tmp_path, "https://idp.invalid/sso")
    saml = {
        "id": "acme-saml",
        "type": "saml",
        "idp_metadata_file": str(metadata),
        "domains": ["Acme.Example"],
    }
    with pytest.raises(ConfigError) as raised:
        make_oauth_app([oidc, saml])
    assert str(raised.value) == (
        "provider 'acme-saml': domains: 'acme.example' is already declared by provider 'corp'"
    )
    with pytest.raises(ConfigError, match="^provider 'saml2': enforce_domain needs domains"):
        make_oauth_app([{**saml, "id": "saml2", "domains": [], "enforce_domain": True}])


# -- the e-mail form -------------------------------------------------------------------


def test_the_email_form_sends_an_acme_address_to_acme_without_mail_or_rows(
    sso_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = sso_app()
    client = app.test_client()
    email = EmailActions(client)
    answers = {}
    for address in (" Ann@ACME.example ", "nobody-here@acme.example"):
        answers[address] = email.request_link(address, callbackUrl="/after")
    # Known or unknown (nobody is known here yet): the same kind of answer, no lookup.
    first, second = answers.values()
    assert first.status_code == second.status_code == 302
    url = first.headers["Location"]
    assert urlsplit(url).path == "/auth/signin"
    assert query_of(url) == {"provider": "op-basic", "email": ANN, "callbackUrl": "/after"}
    assert query_of(second.headers["Location"])["email"] == "nobody-here@acme.example"

    # htmx (the island posts in place and follows the redirect) and JSON mode: the same
    # pointer, the sign-in page offering the provider.
    token = email.csrf()
    htmx = client.post(
        "/auth/signin/email",
        data={"csrfToken": token, "email": ANN, "callbackUrl": "/after"},
        headers={"HX-Request": "true"},
    )
    assert htmx.status_code == 302 and htmx.headers["Location"] == url
    scripted = client.post(  # as Auth.js's client asks for JSON
        "/auth/signin/email",
        data={"csrfToken": token, "email": ANN, "callbackUrl": "/after"},
        headers={"X-Auth-Return-Redirect": "1"},
    )
    assert scripted.status_code == 200 and scripted.json == {"url": url}

    assert mailbox.messages == []
    assert row_count(app, VerificationToken) == 0 and row_count(app, AuthEvent) == 0

    page = client.get(urlsplit(url).path + "?" + urlsplit(url).query).get_data(as_text=True)
    form = re.search(
        r'<div class="note stack" data-sso-provider="op-basic">(.*?)</div>', page, re.S
    )
    assert form, page
    box = form.group(1)
    assert "Continue with Acme staff" in box
    assert 'action="/auth/signin/op-basic?login_hint=ann%40acme.example"' in box
    assert 'name="csrfToken"' in box and 'name="callbackUrl" value="/after"' in box

    # Another domain still gets its link.
    assert (
        email.request_link("bob@example.org")
        .headers["Location"]
        .startswith("http://localhost/auth/verify-request")
    )
    assert [m["To"] for m in mailbox.messages] == ["bob@example.org"]


def test_continue_with_acme_signs_in_with_the_address_as_login_hint(
    sso_app: Callable[..., Flask],
) -> None:
    app = sso_app()
    client = app.test_client()
    location = EmailActions(client).request_link(ANN, callbackUrl="/after").headers["Location"]
    page = client.get(location.removeprefix("http://localhost")).get_data(as_text=True)
    action = unquote(re.search(r'action="(/auth/signin/op-basic\?[^"]+)"', page).group(1))
    browser = Browser(client)
    done = browser.sign_in("op-basic", callback_url="/after", **query_of(action))
    assert done.status_code == 302 and done.headers["Location"] == "http://localhost/after"
    [user] = rows(app, User)
    assert user.email == ANN and user.email_verified is not None


@pytest.mark.parametrize(
    ("address", "covered_by"),
    [
        ("ann@acme.example", "acme.example"),
        ("ann@eu.acme.example", "*.acme.example"),
        ("ann@lab.eu.acme.example", "*.acme.example"),
        ("ann@evilacme.example", None),
        ("ann@acme.example.evil.test", None),
        ("ann@example", None),
    ],
)
def test_a_wildcard_covers_subdomains_at_any_depth_and_no_other_domain(
    address: str, covered_by: str | None
) -> None:
    rule = DomainRule(frozenset({"acme.example", "*.acme.example"}))
    assert rule.match(address) == covered_by
    assert DomainRule(frozenset({"*.acme.example"})).match("ann@acme.example") is None


def test_the_closest_declaration_decides_where_an_address_signs_in(
    make_oauth_app: Callable[..., Flask], acme_op: AcmeOP, mailbox: Mailbox
) -> None:
    """The group's provider for acme.example and all its subdomains, a subsidiary's for
    eu.acme.example alone: the form sends each address to the one declared most closely."""
    app = make_oauth_app(
        [
            {"id": "email", "type": "email"},
            acme(acme_op, domains=["acme.example", "*.acme.example"]),
            acme_op.provider_config("op-post", name="Acme Europe", domains=["eu.acme.example"]),
        ],
        EMAIL_SERVER=mailbox.url(),
        EMAIL_TIMEOUT="5",
    )
    email = EmailActions(app.test_client())
    for address, provider in [
        ("ann@acme.example", "op-basic"),
        ("ann@de.acme.example", "op-basic"),
        ("ann@eu.acme.example", "op-post"),
        ("ann@lab.eu.acme.example", "op-basic"),  # eu.acme.example covers itself alone
    ]:
        answer = email.request_link(address)
        assert query_of(answer.headers["Location"]).get("provider") == provider, address
    assert mailbox.messages == []
    assert (
        email.request_link("ann@evilacme.example")
        .headers["Location"]
        .startswith("http://localhost/auth/verify-request")
    )


# -- enforce_domain --------------------------------------------------------------------


def test_an_email_link_and_code_for_an_enforced_domain_are_refused(
    sso_app: Callable[..., Flask], make_oauth_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    """A link and a code sent before Acme's provider took the domain (the same database)."""
    before = make_oauth_app(
        [{"id": "email", "type": "email"}], EMAIL_SERVER=mailbox.url(), EMAIL_TIMEOUT="5"
    )
    for_link, for_code = before.test_client(), before.test_client()
    EmailActions(for_link).request_link(ANN)
    link = link_of(mailbox.last())
    EmailActions(for_code).request_link(ANN)
    code = code_of(mailbox.last())

    app = sso_app(enforce=True)
    link_client = app.test_client()
    refused = EmailActions(link_client).confirm(link)
    assert error_of(refused) == "SSORequired"
    code_client = app.test_client()
    cookie = for_code.get_cookie("auth.email-browser", path="/auth")
    code_client.set_cookie("auth.email-browser", cookie.value, path="/auth")
    token = EmailActions(code_client).csrf()
    refused = code_client.post("/auth/callback/email", data={"csrfToken": token, "code": code})
    assert error_of(refused) == "SSORequired"
    # Nothing written: no user, both requests still there.
    assert rows(app, User) == [] and row_count(app, VerificationToken) == 2

    # The sign-in page says why, and offers Acme's provider.
    page = link_client.get("/auth/signin?error=SSORequired").get_data(as_text=True)
    assert "Sign in through your organisation" in page
    assert "Continue with Acme staff" in page


def test_another_provider_and_the_credentials_hook_are_refused(
    sso_app: Callable[..., Flask],
) -> None:
    hooks = AuthHooks()

    @hooks.authorize_credentials
    def authorize(form: Any) -> UserInfo:
        return UserInfo(email=ANN, name="Ann", subject="ann")

    app = sso_app(enforce=True, hooks=hooks)
    browser = Browser(app.test_client())
    # Ann's account at the same OP, through the provider that is not Acme's.
    assert error_of(browser.sign_in("op-post", login_hint=ANN)) == "SSORequired"
    # An unverified claim too: it would make a user showing the address.
    assert error_of(browser.sign_in("op-post", login_hint=EVE)) == "SSORequired"
    token = browser.csrf()
    form = {"csrfToken": token, "email": ANN, "password": "anything"}
    password = browser.client.post("/auth/callback/password", data=form)
    assert error_of(password) == "SSORequired"
    assert rows(app, User) == [] and rows(app, Account) == [] and rows(app, Session) == []
    # Acme's own provider lets her in.
    assert error_of(browser.sign_in("op-basic", login_hint=ANN)) is None


def test_a_passkey_of_a_user_of_an_enforced_domain_is_refused(
    sso_app: Callable[..., Flask],
) -> None:
    """Whatever way in finds the user (here a passkey Ann added before Acme's provider
    enforced its domain) is refused by her address."""
    before = sso_app()
    browser = Browser(before.test_client())
    assert error_of(browser.sign_in("op-basic", login_hint=ANN)) is None
    added = Passkeys(browser.client)
    assert added.register().status_code == 200
    app = sso_app(enforce=True)
    passkey = Passkeys(app.test_client(), added.authenticator)
    assert query_of(passkey.sign_in()).get("error") == "SSORequired"
    assert len(rows(app, Session)) == 1  # the first sign-in's only


# -- joining ---------------------------------------------------------------------------


def test_an_existing_user_is_joined_once_and_the_operator_can_undo_it(
    sso_app: Callable[..., Flask], mailbox: Mailbox
) -> None:
    app = sso_app(enforce=False)
    with app.app_context():
        db.session.add(User(email=ANN, email_verified=sa.func.now()))
        db.session.commit()
    [ann] = rows(app, User)

    browser = Browser(app.test_client())
    assert error_of(browser.sign_in("op-basic", login_hint=ANN)) is None
    [account] = rows(app, Account)
    [join] = rows(app, SsoJoin)
    assert account.user_id == ann.id and (join.user_id, join.provider) == (ann.id, "op-basic")
    assert (join.email, join.account_id, join.undone_at) == (ANN, account.id, None)
    # Another provider of the same OP without domains does not join her.
    assert error_of(Browser(app.test_client()).sign_in("op-post", login_hint=ANN)) == (
        "OAuthAccountNotLinked"
    )

    runner = app.test_cli_runner()
    listed = runner.invoke(args=["auth", "sso", "list"])
    assert listed.exit_code == 0
    assert re.fullmatch(rf"{join.id}  \S+ \S+  user {ann.id}  {ANN}  op-basic\n", listed.output), (
        listed.output
    )
    undone = runner.invoke(args=["auth", "sso", "undo", str(join.id)])
    assert undone.exit_code == 0, undone.output
    assert "account removed, 1 session(s) signed out" in undone.output
    assert rows(app, Account) == [] and rows(app, Session) == []
    assert runner.invoke(args=["auth", "sso", "undo", str(join.id)]).exit_code == 1
    assert "undone" in runner.invoke(args=["auth", "sso", "list"]).output

    # Not joined again by itself.
    again = Browser(app.test_client()).sign_in("op-basic", login_hint=ANN)
    assert error_of(again) == "OAuthAccountNotLinked"
    assert rows(app, Account) == []
    with app.app_context():
        kinds = db.session.execute(
            sa.select(AuthEvent.type, AuthEvent.detail).where(AuthEvent.user_id == ann.id)
        ).all()
    assert ("account.unlinked", {"by": "operator", "join": join.id}) in kinds
    assert ("session.revoked", {"reason": "operator", "sessions": 1}) in kinds


def test_a_saml_provider_declared_for_the_domain_joins_an_existing_user(
    make_oauth_app: Callable[..., Flask], simplesamlphp: Any
) -> None:
    """SimpleSAMLphp's Ann (ann@acme.example): ``domains`` also makes her address verified."""
    entry = {
        "id": SP_ID,
        "type": "saml",
        "name": "Acme staff",
        "idp_metadata_url": simplesamlphp.metadata_url,
        "domains": ["acme.example"],
        "enforce_domain": True,
    }
    app = make_oauth_app([entry])
    with app.app_context():
        db.session.add(User(email=ANN, email_verified=sa.func.now()))
        db.session.commit()
    [ann] = rows(app, User)
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "ann")
    done = post_response(client, posted.saml_response)
    assert error_of(done) is None, done.headers.get("Location")
    [join] = rows(app, SsoJoin)
    [account] = rows(app, Account)
    assert (join.user_id, join.provider, join.account_id) == (ann.id, SP_ID, account.id)
    assert account.user_id == ann.id


@pytest.mark.parametrize("declared_closer", [False, True], ids=["only-wildcard", "closer-other"])
def test_a_saml_address_is_verified_only_where_its_domain_belongs_to_that_provider(
    make_oauth_app: Callable[..., Flask],
    simplesamlphp: Any,
    acme_op: AcmeOP,
    declared_closer: bool,
) -> None:
    """SimpleSAMLphp's Eve (eve@eu.acme.example), an existing verified user. Declared for
    *.acme.example, the IdP vouches for her address and joins her. With another provider
    declared for eu.acme.example itself, her address is that provider's: the IdP's word
    for it is an unverified address, which joins no one (a new user of its own)."""
    entries: list[dict[str, Any]] = [
        {
            "id": SP_ID,
            "type": "saml",
            "name": "Acme group",
            "idp_metadata_url": simplesamlphp.metadata_url,
            "domains": ["*.acme.example"],
        }
    ]
    if declared_closer:
        europe = {"name": "Acme Europe", "domains": ["eu.acme.example"]}
        entries.append(acme_op.provider_config("op-post", **europe))
    app = make_oauth_app(entries)
    with app.app_context():
        db.session.add(User(email=EU_EVE, email_verified=sa.func.now()))
        db.session.commit()
    client = app.test_client()
    posted = simplesamlphp.login(start(client), "eve")
    done = post_response(client, posted.saml_response)
    assert error_of(done) is None, done.headers.get("Location")
    [account] = rows(app, Account)
    if declared_closer:
        assert rows(app, SsoJoin) == []
        existing, new = sorted(rows(app, User), key=lambda u: u.id)
        assert account.user_id == new.id != existing.id
        assert (new.email, new.email_verified) == (EU_EVE, None)
    else:
        [eve] = rows(app, User)
        [join] = rows(app, SsoJoin)
        assert (join.user_id, join.provider, join.email) == (eve.id, SP_ID, EU_EVE)
        assert account.user_id == eve.id
