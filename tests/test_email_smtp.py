"""E-mail sign-in over real SMTP servers on loopback: the message, TLS, AUTH and failures."""

from __future__ import annotations

import re
import ssl

import pytest

from webapp.settings import ConfigError
from webapp.storage.models import VerificationToken

from .support.mail import SMTP_USER, EmailActions, code_of, html_of, link_of, text_of
from .support.rows import row_count


def test_link_from_a_real_smtp_message_signs_in(email_app, mailbox):
    app = email_app()
    actions = EmailActions(app.test_client())
    r = actions.request_link("Ann@Example.com", callbackUrl="/account")
    assert r.status_code == 302
    assert r.headers["Location"] == (
        "http://localhost/auth/verify-request?provider=email&type=email"
    )
    assert mailbox.envelopes == [("no-reply@localhost", ["ann@example.com"])]

    r = actions.confirm(link_of(mailbox.last()))
    assert r.status_code == 302
    assert r.headers["Location"] == "http://localhost/account"
    assert actions.session_email() == "ann@example.com"


def test_code_from_a_real_smtp_message_signs_in_the_requesting_browser(email_app, mailbox):
    app = email_app()
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    r = actions.enter_code(code_of(mailbox.last()))
    assert r.status_code == 302
    assert actions.session_email() == "ann@example.com"


def test_the_client_names_itself_after_the_sender_domain(email_app, mailbox):
    # Without a name smtplib looks this machine's FQDN up in DNS for every message.
    app = email_app(EMAIL_FROM="Webapp <login@mail.example.org>")
    EmailActions(app.test_client()).request_link("ann@example.com")
    assert mailbox.helo_names == ["mail.example.org"]
    assert mailbox.last()["Message-ID"].endswith("@mail.example.org>")


def test_the_message_is_multipart_escaped_and_self_contained(email_app, mailbox):
    app = email_app(AUTH_BRAND_NAME="Ann & Bob's <Shop>")
    EmailActions(app.test_client()).request_link("o'brien@example.com")
    message = mailbox.last()

    assert message.get_content_type() == "multipart/alternative"
    assert message["Subject"] == "Sign in to Ann & Bob's <Shop>"
    assert message["To"] == "o'brien@example.com"
    assert message["Auto-Submitted"] == "auto-generated"
    text, html = text_of(message), html_of(message)
    link, code = link_of(message), code_of(message)
    for body in (text, html):
        assert "expire in 24 hours" in body
        assert "If you did not ask for this" in body
        assert code in body
    assert link in text
    # In HTML the link sits in an href (with &amp;) and as visible text; names are escaped.
    assert html.count(f'href="{link.replace("&", "&amp;")}"') == 2
    assert "Ann &amp; Bob&#39;s &lt;Shop&gt;" in html
    assert "o&#39;brien@example.com" in html
    assert "<Shop>" not in html
    # Nothing that loads from the network or tracks: no images, scripts or remote styles.
    assert not re.search(r"<(img|script|link|iframe)\b|url\(|src=", html, re.IGNORECASE)


def test_subject_and_templates_can_be_replaced(email_app, mailbox, tmp_path):
    (tmp_path / "signin.txt").write_text("Your link: {{ url }} code {{ code }}\n")
    (tmp_path / "signin.html").write_text('<p><a href="{{ url }}">{{ site }}</a></p>\n')
    app = email_app(
        EMAIL_SUBJECT="Your {{ site }} link", EMAIL_TEMPLATES=str(tmp_path), AUTH_BRAND_NAME="Shop"
    )
    EmailActions(app.test_client()).request_link("ann@example.com")
    message = mailbox.last()
    assert message["Subject"] == "Your Shop link"
    assert text_of(message).startswith("Your link: http://localhost/auth/callback/email?")
    assert html_of(message).startswith('<p><a href="http://localhost/auth/callback/email?')


def test_smtp_login_is_used_when_the_url_has_credentials(email_app, mailbox):
    app = email_app(EMAIL_SERVER=mailbox.url(login=True))
    EmailActions(app.test_client()).request_link("ann@example.com")
    assert mailbox.logins == [SMTP_USER]
    assert len(mailbox.messages) == 1


def test_a_wrong_smtp_password_is_email_signin_and_leaves_no_token(email_app, mailbox):
    app = email_app(EMAIL_SERVER=f"smtp://{SMTP_USER}:wrong@127.0.0.1:{mailbox.port}")
    r = EmailActions(app.test_client()).request_link("ann@example.com")
    assert r.headers["Location"].endswith("/auth/error?error=EmailSignin")
    assert mailbox.messages == []
    assert row_count(app, VerificationToken) == 0


@pytest.mark.parametrize("kind", ["starttls", "smtps"])
def test_delivery_over_tls(make_app, tls_mailboxes, kind):
    box = getattr(tls_mailboxes, kind)
    scheme = "smtps" if kind == "smtps" else "smtp"
    app = make_app(
        EMAIL_SERVER=box.url(scheme, login=True),
        EMAIL_CA_FILE=tls_mailboxes.ca_file,
        EMAIL_TIMEOUT="5",
    )
    box.reset()
    actions = EmailActions(app.test_client())
    actions.request_link("ann@example.com")
    # The STARTTLS server refuses mail before TLS, so a delivery proves the upgrade happened.
    assert box.logins == [SMTP_USER]
    assert actions.confirm(link_of(box.last())).status_code == 302
    assert actions.session_email() == "ann@example.com"


def test_a_server_offering_no_tls_costs_no_tls_context(email_app, mailbox, monkeypatch):
    # Loading the CA bundle costs a worker about 2.5 MB: only for messages sent over TLS.
    app = email_app()
    built: list[object] = []
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **kw: built.append(kw))
    EmailActions(app.test_client()).request_link("ann@example.com")
    assert len(mailbox.messages) == 1
    assert built == []


def test_an_untrusted_certificate_is_email_signin(make_app, tls_mailboxes):
    app = make_app(EMAIL_SERVER=f"smtps://127.0.0.1:{tls_mailboxes.smtps.port}", EMAIL_TIMEOUT="5")
    tls_mailboxes.smtps.reset()
    r = EmailActions(app.test_client()).request_link("ann@example.com")
    assert r.headers["Location"].endswith("/auth/error?error=EmailSignin")
    assert tls_mailboxes.smtps.messages == []
    assert row_count(app, VerificationToken) == 0


@pytest.mark.parametrize(
    "failure",
    ["refused", "stalled", "rcpt 550", "rcpt 451", "data 554"],
)
def test_failed_delivery_is_email_signin_and_leaves_nothing(
    failure, email_app, mailbox, refusing_smtp, stalling_smtp
):
    overrides = {}
    if failure == "refused":
        overrides["EMAIL_SERVER"] = refusing_smtp
    elif failure == "stalled":
        overrides.update(EMAIL_SERVER=stalling_smtp, EMAIL_TIMEOUT="0.5")
    elif failure.startswith("rcpt"):
        mailbox.rcpt_reply = f"{failure[5:]} Mailbox unavailable"
    else:
        mailbox.data_reply = "554 Message rejected as spam"
    app = email_app(**overrides)
    client = app.test_client()
    r = EmailActions(client).request_link("ann@example.com", callbackUrl="/account")

    assert r.status_code == 302
    assert r.headers["Location"] == (
        "http://localhost/auth/error?error=EmailSignin&callbackUrl=%2Faccount"
    )
    assert row_count(app, VerificationToken) == 0
    assert mailbox.messages == []
    # The browser got no code binding either: the request never happened.
    assert client.get_cookie("auth.email-browser", path="/auth") is None
    # The sign-in page shows the EmailSignin message so the person can retry in place.
    page = client.get(r.headers["Location"], follow_redirects=True).get_data(as_text=True)
    assert 'data-error-code="EmailSignin"' in page


@pytest.mark.parametrize(
    ("server", "complaint"),
    [
        ("http://mail.example.com", "must start with smtp:// (STARTTLS) or smtps://"),
        ("smtp://", "needs a host"),
        ("smtp://user:hunter2@mail.example.com:99999", "invalid port"),
    ],
)
def test_a_bad_email_server_stops_start_up_without_showing_the_password(
    make_app, server, complaint
):
    with pytest.raises(ConfigError, match=re.escape(complaint)) as caught:
        make_app(EMAIL_SERVER=server)
    assert "hunter2" not in str(caught.value)


def test_an_international_address_is_delivered_with_smtputf8(email_app, mailbox):
    app = email_app()
    actions = EmailActions(app.test_client())
    actions.request_link("JÖRG@Bücher.de")
    assert mailbox.envelopes == [("no-reply@localhost", ["jörg@bücher.de"])]
    assert mailbox.last()["To"] == "jörg@bücher.de"
    assert actions.confirm(link_of(mailbox.last())).status_code == 302
    assert actions.session_email() == "jörg@bücher.de"
