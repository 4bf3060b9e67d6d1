"""Every pattern that reads a request takes time linear in it (issue 40).

One signed-out GET whose query held 60,000 "?" and then "&=" held a worker for 18 s: the
log redaction's regex looked for a name after every "?" of the run, each time to the run's
end. Each test here gives a pattern or parser that sees client input (the app's own, and
werkzeug's and ua-parser's as the app calls them) an input shaped to make it work hard, at
the largest size the app accepts (``LARGEST``: a request line with its headers, or a body)
and at a quarter of it. It passes when the larger takes less than 8 times the CPU time of
the smaller: 4 times for linear work, 16 for quadratic. The user agent, which the app cuts
short before ua-parser reads it, must cost the same at both sizes (at most twice).

The time is this thread's CPU time (the Flask test client answers in the caller's thread),
the least of a few rounds, each long enough to be far above the timer's resolution, with
the garbage collector held off: the load of the machine does not count.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import math
import time
from collections.abc import Callable
from ipaddress import ip_network
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import pytest
from flask import request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.test import create_environ

from webapp.audit import trail as audit
from webapp.core import proxies, redirects
from webapp.core.hosts import hostname
from webapp.errors import AuthError
from webapp.flows import bearer
from webapp.flows.signin import oauth
from webapp.i18n import select_locale
from webapp.mail import email_addresses as addresses
from webapp.second_factor import recovery_codes, totp
from webapp.settings import TrustedProxies
from webapp.telemetry import logs as observability
from webapp.telemetry import logsafe
from webapp.web import account_display as display
from webapp.web import client_log as beacon
from webapp.web.error_answers import expects_json

T = TypeVar("T")

#: The largest request line with its headers (deploy/serve.py's HEADER_BYTES) and the
#: largest body (MAX_CONTENT_LENGTH) the app accepts, in bytes.
LARGEST = 64 * 1024
#: Linear work grows 4 times from a quarter of LARGEST to LARGEST, quadratic 16 times.
LINEAR = 8
#: Work a bound cuts short does not grow.
BOUNDED = 2
#: Rounds measured at each size; the least counts.
ROUNDS = 5
#: CPU time one round takes at least (calls are repeated to reach it).
ROUND_SECONDS = 0.005


def pumped(unit: str, size: int, head: str = "", tail: str = "") -> str:
    """``head``, then ``unit`` repeated, then ``tail``: at most ``size`` characters."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def _cpu_seconds(work: Callable[[T], object], given: T, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        work(given)
    return time.thread_time() - start


def assert_grows_at_most(factor: float, work: Callable[[T], object], small: T, large: T) -> None:
    """Assert that ``work(large)`` (an input 4 times ``small``'s) takes less than ``factor``
    times the CPU time of ``work(small)``, the least of ``ROUNDS`` rounds of each."""
    gc.collect()
    gc.disable()
    try:
        once = _cpu_seconds(work, small, 1)
        calls = max(1, math.ceil(ROUND_SECONDS / max(once, 1e-6)))
        small_time = min(_cpu_seconds(work, small, calls) for _ in range(ROUNDS))
        large_time = math.inf
        for _ in range(ROUNDS):
            large_time = min(large_time, _cpu_seconds(work, large, calls))
            if large_time < factor * small_time:
                return
    finally:
        gc.enable()
    raise AssertionError(
        f"{large_time / calls:.6f} s for the larger input, "
        f"{large_time / small_time:.1f} times the {small_time / calls:.6f} s of the smaller "
        f"(at most {factor} times)"
    )


def assert_linear(work: Callable[[str], object], make: Callable[[int], str]) -> None:
    """``work`` on ``make(LARGEST)`` takes less than ``LINEAR`` times its time on
    ``make(LARGEST // 4)``."""
    assert_grows_at_most(LINEAR, work, make(LARGEST // 4), make(LARGEST))


def test_the_largest_size_is_what_the_server_and_the_app_accept(app):
    path = Path(__file__).resolve().parent.parent / "deploy" / "serve.py"
    spec = importlib.util.spec_from_file_location("serve", path)
    assert spec is not None and spec.loader is not None
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    assert serve.HEADER_BYTES == LARGEST
    assert app.config["MAX_CONTENT_LENGTH"] == LARGEST


# The log redaction and the lines that use it

#: The request of issue 40, and its kin: a run of "?" ending at a separator, at whitespace,
#: and at whitespace that is not ASCII (the redactor's other path; a raw byte 0x85 in a
#: request's target reaches the app as U+0085).
QUESTION_MARK_RUNS = {
    "then &=": lambda size: pumped("?", size, tail="&="),
    "then space =": lambda size: pumped("?", size, tail=" ="),
    "then U+0085 =": lambda size: pumped("?", size, tail="\x85="),
    "token after each": lambda size: pumped("?token", size, tail="&="),
}


def request_line(make_query: Callable[[int], str]) -> Callable[[int], str]:
    """A maker of request lines of a given size around ``make_query``'s queries."""
    return lambda size: f"GET /?{make_query(size - 15)} HTTP/1.1"


@pytest.mark.parametrize("make", QUESTION_MARK_RUNS.values(), ids=QUESTION_MARK_RUNS.keys())
def test_redacting_a_request_line_is_linear(make):
    assert_linear(logsafe.redact, request_line(make))


@pytest.mark.parametrize("make", QUESTION_MARK_RUNS.values(), ids=QUESTION_MARK_RUNS.keys())
def test_redacting_a_query_string_is_linear(make):
    assert_linear(logsafe.redact_query, make)


def access_environ(query: str = "", agent: str = "curl/8.5") -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/auth/session",
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "203.0.113.9",
        "HTTP_USER_AGENT": agent,
    }


def write_access_line(environ: dict[str, Any]) -> None:
    observability._log_access(environ, "200 OK", [], "rid", 0.001, logging.INFO)


@pytest.mark.parametrize("make", QUESTION_MARK_RUNS.values(), ids=QUESTION_MARK_RUNS.keys())
def test_the_access_line_of_a_long_query_is_linear(make, caplog):
    caplog.set_level(logging.INFO, logger="webapp.access")
    assert_linear(lambda query: write_access_line(access_environ(query)), make)


def test_the_access_line_of_a_long_user_agent_is_linear(caplog):
    caplog.set_level(logging.INFO, logger="webapp.access")
    # Every character escaped, each to four.
    make = lambda size: pumped("\x85\\", size)  # noqa: E731
    assert_linear(lambda agent: write_access_line(access_environ(agent=agent)), make)


@pytest.mark.parametrize("make", QUESTION_MARK_RUNS.values(), ids=QUESTION_MARK_RUNS.keys())
def test_the_development_servers_line_filter_is_linear(make):
    redaction = observability._DevServerRedaction()

    def filtered(line: str) -> None:
        redaction.filter(logging.makeLogRecord({"msg": '"%s" %s %s', "args": (line, 200, "-")}))

    assert_linear(filtered, request_line(make))


def test_a_beacons_values_and_keys_are_linear():
    assert_linear(beacon._value, QUESTION_MARK_RUNS["then &="])
    assert_linear(beacon._key, lambda size: pumped("a", size, tail="!"))


# The app's other patterns that see client input


class TenantIssuerClient:
    """A provider whose issuer names the tenant twice (none does today; Entra names it once),
    as ``_check_iss`` reads one."""

    id = "entra"
    is_oidc = True

    def document(self) -> dict[str, object]:
        return {
            "issuer": "https://login.example.com/{tenantid}-{tenantid}/v2.0",
            "authorization_response_iss_parameter_supported": True,
        }


def forwarded_for(value: str) -> None:
    """Apply a trusted proxy's X-Forwarded-For (every address in it is a trusted proxy's)."""
    layer = proxies.ForwardedHeaders(
        lambda environ, start_response: [], TrustedProxies(networks=(ip_network("10.0.0.0/8"),))
    )
    layer({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": value}, None)


def refused(check: Callable[[str], object], error: type[Exception]) -> Callable[[str], None]:
    def work(value: str) -> None:
        with pytest.raises(error):
            check(value)

    return work


#: (the check, an input that makes it work hard, of a given size), by what it reads.
APP_PATTERNS: dict[str, tuple[Callable[[str], object], Callable[[int], str]]] = {
    "Authorization: Bearer": (
        lambda value: bearer._HEADER.fullmatch(value.strip()),
        lambda size: pumped("a", size, head="Bearer ", tail="!"),
    ),
    "Authorization: Bearer, spaces": (
        lambda value: bearer._HEADER.fullmatch(value.strip()),
        lambda size: pumped(" ", size, head="Bearer", tail="a!"),
    ),
    "Host": (hostname, lambda size: pumped("a.", size, tail="!")),
    "Host, IPv6": (hostname, lambda size: pumped("0:", size, head="[", tail="!")),
    "X-Request-ID": (observability.new_request_id, lambda size: pumped("a", size)),
    "X-Forwarded-For": (forwarded_for, lambda size: pumped("10.0.0.1,", size)),
    "callbackUrl": (
        lambda value: redirects._same_site_path(value, "http://localhost"),
        lambda size: pumped("%25", size, head="/"),
    ),
    "name or address shown": (display.breakable, lambda size: pumped("-.", size)),
    "one-time code": (totp.normalise_code, lambda size: pumped(" -", size, tail="1")),
    "recovery code": (recovery_codes.normalise, lambda size: pumped(" -", size, tail="a")),
    "e-mail address": (
        refused(addresses.normalize_email, addresses.InvalidAddress),
        # Each character expands to 18 under NFKC.
        lambda size: pumped("\ufdfa", size, tail="@"),
    ),
    "iss of a tenant issuer": (
        refused(lambda iss: oauth._check_iss(TenantIssuerClient(), iss), AuthError),
        lambda size: pumped("-", size, head="https://login.example.com/", tail="!"),
    ),
}


@pytest.mark.parametrize("check, make", APP_PATTERNS.values(), ids=APP_PATTERNS.keys())
def test_the_apps_patterns_are_linear(check, make):
    assert_linear(check, make)


#: Numbers no user agent measured has started with: the parsers remember agents.
FRESH = count()


def test_the_device_label_reads_a_bounded_user_agent(app):
    """ua-parser takes about 15 µs a character (a second for 64 KiB): the user agent is cut
    to ``user_agent_max_length`` before it is parsed (a session keeps it cut as well, and
    the account page parses that)."""
    environ = create_environ()  # built once: werkzeug's checks of a test request's headers

    def device(agent: str) -> str:
        with app.request_context({**environ, "HTTP_USER_AGENT": f"{next(FRESH)} {agent}"}):
            return audit.this_device()

    make = lambda size: pumped("; ", size, head="Mozilla/5.0 (")  # noqa: E731
    assert_grows_at_most(BOUNDED, device, make(LARGEST // 4), make(LARGEST))


# Werkzeug's parsing of what the app reads of a request

MULTIPART_HEAD = '--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n'

#: (how the request is sent with a given text, how the app reads it, the text's unit that
#: made it work hardest of those tried), by what it reads.
REQUEST_READS: dict[str, tuple[Callable[[str], dict[str, Any]], Callable[[], object], str]] = {
    "cookies": (lambda text: {"headers": {"Cookie": text}}, lambda: request.cookies, "\\;"),
    "Accept-Language": (
        lambda text: {"headers": {"Accept-Language": text}},
        select_locale,
        "a,",
    ),
    "Accept": (
        lambda text: {"headers": {"Accept": text}},
        expects_json,
        "a/b;c=d,",
    ),
    "Content-Type": (
        lambda text: {"headers": {"Content-Type": "text/plain" + text}},
        lambda: request.mimetype,
        ";a*=utf-8''",
    ),
    "query": (lambda text: {"query_string": text}, lambda: request.args, "%&%"),
    "form": (
        lambda text: {
            "method": "POST",
            "data": text,
            "content_type": "application/x-www-form-urlencoded",
        },
        lambda: request.form,
        "%&%",
    ),
    "multipart form": (
        lambda text: {
            "method": "POST",
            "data": MULTIPART_HEAD + text + "\r\n--B--\r\n",
            "content_type": "multipart/form-data; boundary=B",
        },
        lambda: request.form,
        "\r\n-",
    ),
}


@pytest.mark.parametrize("send, read, unit", REQUEST_READS.values(), ids=REQUEST_READS.keys())
def test_werkzeugs_parsing_of_what_the_app_reads_is_linear(app, send, read, unit):
    def parsed(text: str) -> None:
        with app.test_request_context(**send(text)):
            try:
                read()
            except RequestEntityTooLarge:
                pass  # too many form parts: the app answers 413, having read no more

    # Room for the rest of a request (its line, the multipart part's head and end).
    assert_linear(parsed, lambda size: pumped(unit, size - 256))


# Issue 40's requests, as an attacker sends them


def test_a_signed_out_get_with_a_run_of_question_marks_answers_at_once(client, caplog):
    caplog.set_level(logging.INFO, logger="webapp.access")
    urls = ["/auth/session?" + "?" * marks + "&=" for marks in (15_000, 60_000)]
    assert len(f"GET {urls[1]} HTTP/1.1") < LARGEST

    def get(url: str) -> None:
        answer = client.get(url)
        answer.close()  # the access line is written when the answer is closed
        assert answer.status_code == 200

    assert_grows_at_most(LINEAR, get, *urls)
    lines = {r.getMessage().split(" 200 ")[0] for r in caplog.records if r.name == "webapp.access"}
    assert lines == {f'127.0.0.1 "GET {url} HTTP/1.1"' for url in urls}


def test_a_beacon_with_a_run_of_question_marks_answers_at_once(app, client):
    limit = app.extensions["webapp.settings"].log_beacon_max_bytes
    bodies = [
        json.dumps({"message": pumped("?", size - 20, tail="&=")}) for size in (limit // 4, limit)
    ]
    assert len(bodies[1]) <= limit

    def post(body: str) -> None:
        answer = client.post("/auth/_log", data=body, content_type="application/json")
        assert answer.status_code == 204

    assert_grows_at_most(LINEAR, post, *bodies)
