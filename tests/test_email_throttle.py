"""Durable throttling of e-mail requests: per address and per IP, across app restarts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from webapp.settings import ConfigError, RateLimit
from webapp.storage.models import VerificationToken

from .support.mail import EmailActions, link_of
from .support.rows import row_count

VERIFY_REQUEST = "http://localhost/auth/verify-request?provider=email&type=email"


def request_from(app, address: str, ip: str = "198.51.100.7"):
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = ip
    return EmailActions(client).request_link(address)


def test_defaults(app):
    conf = app.extensions["webapp.settings"]
    assert conf.email_address_ip_limit == RateLimit(3, timedelta(minutes=10))
    assert conf.email_address_limit == RateLimit(10, timedelta(hours=1))
    assert conf.email_ip_limit == RateLimit(20, timedelta(minutes=10))


def test_the_fourth_message_to_an_address_from_one_ip_is_not_sent_even_after_a_restart(
    email_app, mailbox
):
    first = email_app()
    for _ in range(3):
        assert request_from(first, "ann@example.com").headers["Location"] == VERIFY_REQUEST
    assert len(mailbox.messages) == 3

    restarted = email_app()  # a new app (another worker, or after a deploy) on the same DB
    # Case and spacing do not make a new address.
    throttled = request_from(restarted, " ANN@example.com ")
    assert throttled.status_code == 302
    assert throttled.headers["Location"] == VERIFY_REQUEST
    assert len(mailbox.messages) == 3
    assert row_count(restarted, VerificationToken) == 3
    # Another address is not affected.
    request_from(restarted, "bob@example.com")
    assert len(mailbox.messages) == 4


def test_requests_from_others_cannot_silence_the_owner(email_app, mailbox):
    app = email_app(EMAIL_ADDRESS_LIMIT="6/1h")
    owner = app.test_client()
    owner.environ_base["REMOTE_ADDR"] = "192.0.2.10"
    EmailActions(owner).request_link("ann@example.com")
    assert EmailActions(owner).confirm(link_of(mailbox.last())).status_code == 302
    assert EmailActions(owner).session_email() == "ann@example.com"

    # Someone else, from a few addresses, uses up the per-address allowance.
    for n in range(8):
        request_from(app, "ann@example.com", ip=f"203.0.113.{n // 3}")
    sent = len(mailbox.messages)
    assert sent == 6  # the owner's 1 + 5 more: the 6/1h per-address limit holds for them
    # A new browser of the owner is silenced too (the cost of that limit) ...
    assert request_from(app, "ann@example.com", ip="192.0.2.99").status_code == 302
    assert len(mailbox.messages) == sent
    # ... but the browser she signed in with before keeps its own allowance.
    for _ in range(3):
        EmailActions(owner).request_link("ann@example.com")
    assert len(mailbox.messages) == sent + 3
    EmailActions(owner).request_link("ann@example.com")
    assert len(mailbox.messages) == sent + 3


def test_ipv6_clients_are_counted_per_64(email_app, mailbox):
    app = email_app(EMAIL_IP_LIMIT="2/10m")
    for n in range(4):
        request_from(app, f"user{n}@example.com", ip=f"2001:db8:1:2::{n + 1}")
    assert len(mailbox.messages) == 2
    request_from(app, "user9@example.com", ip="2001:db8:1:3::1")  # another /64
    assert len(mailbox.messages) == 3


def test_the_21st_request_from_one_ip_is_not_sent_even_after_a_restart(email_app, mailbox):
    first = email_app()
    for n in range(20):
        request_from(first, f"user{n}@example.com")
    assert len(mailbox.messages) == 20

    restarted = email_app()
    assert request_from(restarted, "late@example.com").headers["Location"] == VERIFY_REQUEST
    assert len(mailbox.messages) == 20
    # The same address from another IP still goes out.
    request_from(restarted, "late@example.com", ip="192.0.2.1")
    assert len(mailbox.messages) == 21


def test_the_allowance_returns_when_the_window_ends(email_app, mailbox):
    app = email_app(EMAIL_ADDRESS_LIMIT="1/10m")
    # The start of a fixed 10-minute window, so both moves below stay inside or cross it.
    now = datetime.now(UTC)
    start = now.replace(minute=now.minute - now.minute % 10, second=0, microsecond=0)
    with freeze_time(start) as frozen:
        request_from(app, "ann@example.com")
        frozen.move_to(start + timedelta(minutes=9, seconds=59))
        request_from(app, "ann@example.com")
        assert len(mailbox.messages) == 1
        frozen.move_to(start + timedelta(minutes=10))
        request_from(app, "ann@example.com")
        assert len(mailbox.messages) == 2


def test_limits_are_configurable(email_app, mailbox):
    app = email_app(EMAIL_ADDRESS_LIMIT="5/1h", EMAIL_IP_LIMIT="2/30s")
    conf = app.extensions["webapp.settings"]
    assert conf.email_address_limit == RateLimit(5, timedelta(hours=1))
    assert conf.email_ip_limit == RateLimit(2, timedelta(seconds=30))
    for n in range(3):
        request_from(app, f"user{n}@example.com")
    assert len(mailbox.messages) == 2


@pytest.mark.parametrize("value", ["3", "3/10", "0/10m", "3/0m", "many/10m", "3/10d"])
def test_a_bad_limit_stops_start_up(make_app, value):
    with pytest.raises(ConfigError, match="EMAIL_ADDRESS_LIMIT must look like 3/10m"):
        make_app(EMAIL_ADDRESS_LIMIT=value)
