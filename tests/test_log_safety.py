"""Logs: no secret in any log line, and no client can forge one (docs/security.md, "Logs")."""

from __future__ import annotations

import io
import logging
import random
import re
import sys
import threading
import unicodedata
from pathlib import Path
from urllib.parse import quote, unquote_plus

import pytest
import requests
from sqlalchemy.exc import OperationalError
from werkzeug.serving import make_server

from webapp.telemetry import logsafe
from webapp.telemetry.logsafe import encode, redact, redact_query

from .support.mail import EmailActions, link_of

ROOT = Path(__file__).resolve().parent.parent

#: Every character str.splitlines() breaks on, and NUL.
BREAKS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x00"]
BREAK_IDS = [f"U+{ord(c):04X}" for c in BREAKS]


def one_safe_line(message: str, char: str) -> bool:
    return len(message.splitlines()) == 1 and char not in message


def records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name]


# The encoder


def test_the_encoder_escapes_exactly_the_controls_line_separators_and_surrogates_of_unicode():
    wanted = {
        c
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Zl", "Zp", "Cs")
    }
    escaped = {c for c in range(sys.maxunicode + 1) if encode(chr(c)) != chr(c)}
    assert escaped == wanted | {ord("\\")}
    breakers = {c for c in range(sys.maxunicode + 1) if len(f"a{chr(c)}b".splitlines()) > 1}
    assert breakers <= wanted


@pytest.mark.parametrize("char", BREAKS, ids=BREAK_IDS)
def test_the_encoder_keeps_a_value_on_one_line(char):
    text = encode(f"before{char}FORGED line")
    assert one_safe_line(text, char)
    assert text.startswith("before\\") and text.endswith("FORGED line")


def test_the_encoder_is_unambiguous_and_leaves_plain_text_alone():
    assert encode("/auth/signin") == "/auth/signin"
    assert encode("a\nb") == "a\\nb"
    # A backslash sent by the client cannot pose as an escape the encoder wrote.
    assert encode("a\\nb") == "a\\\\nb"
    assert encode("\x85\u2028\x00\t") == "\\x85\\u2028\\x00\\t"
    # A lone surrogate (from JSON's "\\ud800") cannot be written as UTF-8: it is escaped.
    assert encode("\ud800x") == "\\ud800x"
    assert encode("\ud800x").encode("utf-8") == b"\\ud800x"
    assert encode("é ü 東京") == "é ü 東京"
    assert encode(42) == "42"


def test_the_encoder_caps_length_with_a_marker():
    assert encode("x" * 1500) == "x" * 1000 + "...[+500 chars]"
    assert encode("abcdef", limit=3) == "abc...[+3 chars]"
    assert encode("x" * 5000, limit=None) == "x" * 5000


def test_quoted_values_escape_their_quotes():
    assert encode('say "hi"\n', quote=True) == '"say \\"hi\\"\\n"'
    assert encode("abcdef", limit=3, quote=True) == '"abc...[+3 chars]"'


# The redactor


def test_a_request_line_loses_the_link_token_and_keeps_the_rest():
    line = "GET /auth/callback/email?token=abc123&email=a%40b.c HTTP/1.1"
    assert redact(line) == ("GET /auth/callback/email?token=[redacted]&email=a%40b.c HTTP/1.1")


@pytest.mark.parametrize("name", sorted(logsafe.SECRET_PARAMS))
def test_every_secret_parameter_is_redacted(name):
    assert redact(f"/cb/x?{name}=s3cret&a=1") == f"/cb/x?{name}=[redacted]&a=1"


def test_percent_encoded_and_differently_cased_names_are_redacted_as_sent():
    assert redact("/cb?%74oken=s3cret") == "/cb?%74oken=[redacted]"
    assert redact("/cb?%74%6F%6B%65%6E=s3cret") == "/cb?%74%6F%6B%65%6E=[redacted]"
    assert redact("/cb?TOKEN=s3cret&Code=s3cret") == "/cb?TOKEN=[redacted]&Code=[redacted]"
    assert redact("/cb?id+token+hint=x&id_token_hint=s3cret") == (
        "/cb?id+token+hint=x&id_token_hint=[redacted]"
    )


def test_repeated_parameters_and_semicolons_are_all_redacted():
    assert redact("/cb?token=one&token=two;token=three&x=1;code=four") == (
        "/cb?token=[redacted]&token=[redacted];token=[redacted]&x=1;code=[redacted]"
    )


def test_text_without_secrets_is_unchanged():
    for text in (
        "/auth/session",
        "GET /auth/session HTTP/1.1",
        "/x?email=a%40b.c&next=/",
        "/x?token",
        "/x?tokens=1&mytoken=2",
        "-",
        "",
    ):
        assert redact(text) == text


def test_redaction_is_idempotent():
    once = redact("/cb?token=s3cret&state=s3cret")
    assert once == "/cb?token=[redacted]&state=[redacted]"
    assert redact(once) == once


def test_a_referer_with_a_fragment_and_empty_values():
    assert redact("https://example.com/auth/callback/email?token=s3cret#top") == (
        "https://example.com/auth/callback/email?token=[redacted]"
    )
    assert redact("/cb?token=&code=") == "/cb?token=[redacted]&code=[redacted]"


def test_a_bare_query_string():
    assert redact_query("token=s3cret&email=a%40b.c") == "token=[redacted]&email=a%40b.c"
    assert redact_query("email=a%40b.c") == "email=a%40b.c"
    assert redact_query("") == ""


def test_stray_spaces_in_a_malformed_request_line_hide_nothing():
    assert "s3cret" not in redact("GET /cb?a=1 &token=s3cret HTTP/1.1")


# The pattern the redactor was until issue 40, kept here only as the reference its
# replacement must agree with: it took time quadratic in a run of "?" (test_linear_time.py).
OLD_PARAM = re.compile(r"(?<=[?&;])([^&;=\s]*)=([^&;\s]*)")


def old_redact(text: str) -> str:
    start = text.find("?")
    if start < 0 or "=" not in text:
        return text
    return text[:start] + OLD_PARAM.sub(_old_redact_param, text[start:])


def old_redact_query(query: str) -> str:
    if "=" not in query:
        return query
    return OLD_PARAM.sub(_old_redact_param, "?" + query)[1:]


def _old_redact_param(match: re.Match[str]) -> str:
    name = match[1]
    decoded = unquote_plus(name) if "%" in name or "+" in name else name
    if decoded.strip().lower() in logsafe.SECRET_PARAMS:
        return f"{name}={logsafe.REDACTED}"
    return match[0]


#: What the random texts are made of, a group drawn first, then one of its pieces: the
#: characters the rules are about, whitespace the redactor's ASCII table handles (space,
#: tab, U+001C) and whitespace only its pattern sees (U+0085, U+2028, no-break space),
#: other characters ("é" is not ASCII either), and names, secret or not once decoded.
NAMES = ("token", "code", "state", "TOKEN", "%74oken", "+code", "tokens")
PIECE_GROUPS = ("?&;", "=", " \t\x1c\x85\u2028\xa0", "%+éab", NAMES, [n + "=" for n in NAMES])


def test_the_redactor_redacts_exactly_what_the_old_pattern_did():
    rng = random.Random(40)
    redacted = {True: 0, False: 0}  # texts with a value redacted, by whether they are ASCII
    for _ in range(20_000):
        text = "".join(rng.choice(rng.choice(PIECE_GROUPS)) for _ in range(rng.randint(0, 12)))
        assert redact(text) == old_redact(text), repr(text)
        assert redact_query(text) == old_redact_query(text), repr(text)
        redacted[text.isascii()] += logsafe.REDACTED in redact_query(text)
    # Not all trivial: thousands hold a secret, on each of the redactor's two paths.
    assert min(redacted.values()) > 1_000, redacted


# The app's own log lines


@pytest.mark.parametrize("char", BREAKS, ids=BREAK_IDS)
def test_a_csrf_failure_on_a_forged_path_logs_one_line(client, caplog, char):
    with caplog.at_level(logging.WARNING, logger="webapp.web.error_answers"):
        r = client.post(f"/auth/signin/x{quote(char)}FORGED%20line")
    assert r.headers["Location"].endswith("error=MissingCSRF")
    [record] = [r for r in records(caplog, "webapp.web.error_answers") if "CSRF" in r.getMessage()]
    assert one_safe_line(record.getMessage(), char)
    assert f"/auth/signin/x{encode(char)}FORGED line" in record.getMessage()


@pytest.mark.parametrize("char", BREAKS, ids=BREAK_IDS)
def test_an_unexpected_error_on_a_forged_path_logs_one_line(app, caplog, char):
    def boom(rest: str) -> str:
        raise RuntimeError("boom")

    app.add_url_rule("/test-boom/<rest>", "test_boom", boom)
    with caplog.at_level(logging.ERROR, logger="webapp.web.error_answers"):
        r = app.test_client().get(f"/test-boom/x{quote(char)}FORGED")
    assert r.status_code == 500
    [record] = [
        r for r in records(caplog, "webapp.web.error_answers") if "unhandled" in r.getMessage()
    ]
    assert one_safe_line(record.getMessage(), char)


@pytest.mark.parametrize("char", BREAKS, ids=BREAK_IDS)
def test_a_database_outage_logs_the_driver_message_on_one_line(app, caplog, char):
    def down(rest: str) -> str:
        raise OperationalError("SELECT 1", {}, Exception(f"server closed{char}FORGED"))

    app.add_url_rule("/test-down/<rest>", "test_down", down)
    with caplog.at_level(logging.ERROR, logger="webapp.web.error_answers"):
        r = app.test_client().get(f"/test-down/x{quote(char)}y")
    assert r.status_code == 503
    [record] = [
        r for r in records(caplog, "webapp.web.error_answers") if "unavailable" in r.getMessage()
    ]
    assert one_safe_line(record.getMessage(), char)


@pytest.mark.parametrize("char", BREAKS, ids=BREAK_IDS)
def test_a_beacon_cannot_forge_a_line_with_its_code_key_or_value(client, caplog, char):
    with caplog.at_level(logging.DEBUG, logger="webapp.client"):
        r = client.post(
            "/auth/_log",
            json={
                "code": f"c{char}FORGED",
                f"k{char}ey": f"v{char}FORGED",
                "message": "m",
            },
        )
    assert r.status_code == 204
    [record] = records(caplog, "webapp.client")
    message = record.getMessage()
    assert one_safe_line(message, char)
    assert f'code="c{encode(char)}FORGED"' in message
    assert f'"k{encode(char)}ey"="v{encode(char)}FORGED"' in message and 'message="m"' in message


def test_a_beacon_value_cannot_pose_as_another_field_or_carry_a_token(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="webapp.client"):
        client.post(
            "/auth/_log",
            json={
                "code": 'X" level="debug',
                "url": "https://h/auth/callback/email?token=s3cret",
            },
        )
    [record] = records(caplog, "webapp.client")
    assert record.getMessage() == (
        'client report code="X\\" level=\\"debug" '
        'url="https://h/auth/callback/email?token=[redacted]"'
    )


def test_an_auth_error_detail_is_encoded_and_redacted(app, caplog):
    from webapp.errors import AuthError
    from webapp.web import error_answers as errors

    detail = "oidc: provider error " + "".join(BREAKS) + " from /cb?code=SECRETCODE1&x=1"
    with app.test_request_context("/auth/callback/oidc"), caplog.at_level(logging.WARNING):
        errors._signin_failed(AuthError("OAuthCallback", detail))
    [record] = records(caplog, "webapp.web.error_answers")
    message = record.getMessage()
    assert len(message.splitlines()) == 1 and not set(BREAKS) & set(message)
    assert "SECRETCODE1" not in message and "code=[redacted]&x=1" in message


# The development server (werkzeug's request log)


def test_the_development_server_log_has_no_token_and_no_forged_line(app, caplog):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with caplog.at_level(logging.INFO, logger="werkzeug"):
            requests.get(
                f"{base}/auth/callback/email?token=SECRETTOKEN1&email=a%40b.c",
                allow_redirects=False,
                timeout=10,
            )
            requests.get(
                f"{base}/nowhere%E2%80%A8FORGED%0Aline?code=SECRETCODE2",
                allow_redirects=False,
                timeout=10,
            )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    lines = [r.getMessage() for r in records(caplog, "werkzeug")]
    [link] = [m for m in lines if "/auth/callback/email" in m]
    [forged] = [m for m in lines if "/nowhere" in m]
    # werkzeug shows the query percent-decoded where it safely can.
    assert "SECRETTOKEN1" not in link and "token=[redacted]&email=a@b.c" in link
    assert "SECRETCODE2" not in forged and "code=[redacted]" in forged
    for char in ("\u2028", "\n"):
        assert one_safe_line(forged, char)


def test_the_development_server_filter_is_installed_once(make_app):
    make_app()
    make_app()
    filters = logging.getLogger("werkzeug").filters
    assert len([f for f in filters if type(f).__name__ == "_DevServerRedaction"]) == 1


# The production server's access log (webapp.telemetry.logs, written after each answer)


@pytest.fixture
def access_lines(app, caplog):
    """Return the access lines written for requests made with ``app``'s test client."""
    caplog.set_level(logging.INFO, logger="webapp.access")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "webapp.access"]


LINK = "/auth/callback/email?token=SECRETTOKEN1&email=a%40b.c"


def test_the_access_log_redacts_and_encodes(client, access_lines):
    r = client.get(LINK, headers={"User-Agent": 'probe\x85FORGED "q" \\x85'})
    r.close()
    [line] = access_lines()
    rid = r.headers["X-Request-ID"]
    assert line.startswith(
        '127.0.0.1 "GET /auth/callback/email?token=[redacted]&email=a%40b.c HTTP/1.1" 302 '
    )
    assert line.endswith(f'ms rid={rid} "probe\\x85FORGED \\"q\\" \\\\x85"')


def test_the_access_log_escapes_a_forged_path_and_redacts_any_secret_parameter(
    client, access_lines
):
    query = "code=SECRETCODE&state=s&token=SECRETTOKEN1&x=1"
    client.get(f"/auth/callback/email\u2028FORGED?{query}").close()
    [line] = access_lines()
    assert "SECRETCODE" not in line and "SECRETTOKEN1" not in line
    assert "/auth/callback/email\\u2028FORGED?" in line
    assert len(line.splitlines()) == 1


@pytest.fixture
def access_stream():
    """The access log set up as the production server's logging config does (granian's
    ``access`` handler: a stream, the message alone, not propagated), on a StringIO; the
    logger's settings are put back afterwards."""
    logger = logging.getLogger("webapp.access")
    saved = logger.handlers[:], logger.level, logger.propagate
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield stream, handler
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def test_the_access_log_writes_the_same_line_with_or_without_a_record(client, access_stream):
    """With the production config the line goes to the stream without a log record; with a
    formatter that adds to the message, through logging, formatted."""
    stream, handler = access_stream
    records: list[logging.LogRecord] = []
    # A filter that keeps every record: logging writes the line.
    logging.getLogger("webapp.access").addFilter(lambda r: records.append(r) or True)
    r = client.get(LINK, headers={"User-Agent": "probe"})
    r.close()
    assert len(records) == 1
    through_logging = stream.getvalue()
    logging.getLogger("webapp.access").filters.clear()
    stream.seek(0), stream.truncate()
    r2 = client.get(LINK, headers={"User-Agent": "probe"})
    r2.close()
    plain = stream.getvalue()
    assert len(records) == 1, "the production config made a record"
    rid, rid2 = r.headers["X-Request-ID"], r2.headers["X-Request-ID"]
    assert plain.endswith(f'ms rid={rid2} "probe"\n') and "token=[redacted]" in plain
    took = re.compile(r" \d+ms ")
    assert took.sub(" Nms ", plain.replace(rid2, rid)) == took.sub(" Nms ", through_logging)
    handler.setFormatter(logging.Formatter("%(levelname)s %(request_id)s %(message)s"))
    stream.seek(0), stream.truncate()
    r3 = client.get("/auth/session")
    r3.close()
    rid3 = r3.headers["X-Request-ID"]
    assert stream.getvalue().startswith(f'INFO {rid3} 127.0.0.1 "GET /auth/session HTTP/1.1"')


def test_the_access_log_is_off_unless_the_server_turns_it_on(client, caplog):
    # Everything else at INFO (as in development, where the development server writes its
    # own request lines): still no access line.
    caplog.set_level(logging.INFO)
    client.get("/auth/session").close()
    assert not [r for r in caplog.records if r.name == "webapp.access"]


# The link's confirmation page


@pytest.fixture
def email_actions(email_app):
    return EmailActions(email_app().test_client())


def test_the_confirmation_page_sends_no_referer_on_get_and_head(email_actions, mailbox):
    email_actions.request_link("ann@example.com")
    link = link_of(mailbox.last())
    path = link.split("http://localhost", 1)[1]
    for method in ("get", "head"):
        r = getattr(email_actions.client, method)(path)
        assert r.status_code == 200
        assert r.headers.getlist("Referrer-Policy") == ["no-referrer"]
        assert r.headers.getlist("Content-Security-Policy")
    # Its form carries the token in a hidden field, never back into a URL.
    html = email_actions.client.get(path).get_data(as_text=True)
    assert 'action="/auth/callback/email"' in html
    assert '<input type="hidden" name="token" value="' in html


def test_an_unusable_link_answers_without_a_referer_too(email_actions):
    r = email_actions.client.get("/auth/callback/email?token=nope&email=ann%40example.com")
    assert r.status_code == 302
    assert r.headers.getlist("Referrer-Policy") == ["no-referrer"]


def test_other_pages_keep_the_default_referrer_policy(client):
    r = client.get("/auth/signin")
    assert r.headers.getlist("Referrer-Policy") == ["strict-origin-when-cross-origin"]
