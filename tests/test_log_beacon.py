"""The client log beacon, POST _log: small reports logged safely, abuse refused."""

from __future__ import annotations

import logging

from freezegun import freeze_time


def test_json_report_is_logged_with_its_level(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="webapp.client"):
        r = client.post(
            "/auth/_log",
            json={"level": "warn", "code": "CLIENT_FETCH_ERROR", "message": "failed to fetch"},
        )
    assert r.status_code == 204
    [record] = [r for r in caplog.records if r.name == "webapp.client"]
    assert record.levelno == logging.WARNING
    assert "CLIENT_FETCH_ERROR" in record.getMessage() and "failed to fetch" in record.getMessage()


def test_form_report_is_accepted(client, caplog):
    with caplog.at_level(logging.INFO, logger="webapp.client"):
        r = client.post("/auth/_log", data={"level": "error", "code": "X", "message": "m"})
    assert r.status_code == 204
    assert any(r.levelno == logging.ERROR for r in caplog.records if r.name == "webapp.client")


def test_fields_are_truncated_and_cannot_forge_log_lines(client, caplog):
    with caplog.at_level(logging.INFO, logger="webapp.client"):
        client.post(
            "/auth/_log",
            json={"message": "a" * 3000 + "\nFAKE ERROR line", "code": "c\r\nInjected"},
        )
    [record] = [r for r in caplog.records if r.name == "webapp.client"]
    text = record.getMessage()
    assert "\n" not in text and "\r" not in text
    assert "a" * 501 not in text


def test_a_lone_surrogate_is_escaped_so_the_line_can_be_written(client, caplog):
    # JSON's "\\ud800" decodes to a lone surrogate, which no UTF-8 log handler can write:
    # unescaped, the whole report would be lost.
    with caplog.at_level(logging.INFO, logger="webapp.client"):
        r = client.post(
            "/auth/_log",
            data=b'{"message": "\\ud800lost?", "\\udc00key": 1}',
            content_type="application/json",
        )
    assert r.status_code == 204
    [record] = [r for r in caplog.records if r.name == "webapp.client"]
    text = record.getMessage()
    assert text.endswith('message="\\ud800lost?" "\\udc00key"="1"')
    text.encode("utf-8")


def test_an_oversized_body_gets_413_like_any_other_and_is_not_logged(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="webapp.client"):
        big = client.post("/auth/_log", json={"message": "x" * 5000})
        # Another POST over the app's own limit (MAX_CONTENT_LENGTH), in JSON mode as well.
        other = client.post(
            "/auth/signin/email",
            data={"email": "a" * 70_000},
            headers={"X-Auth-Return-Redirect": "1"},
        )
    assert (big.status_code, other.status_code) == (413, 413)
    for answer in (big, other):
        assert answer.json == {
            "error": "Request Entity Too Large",
            "requestId": answer.headers["X-Request-ID"],
            "url": "http://localhost/auth/error?error=RequestEntityTooLarge",
        }
    assert not [r for r in caplog.records if r.name == "webapp.client"]


def test_malformed_bodies_get_400_and_are_not_logged(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="webapp.client"):
        broken = client.post("/auth/_log", data=b"{not json", content_type="application/json")
        listy = client.post("/auth/_log", json=["a", "b"])
        text = client.post("/auth/_log", data=b"hello", content_type="text/plain")
    assert [r.status_code for r in (broken, listy, text)] == [400] * 3
    assert broken.json == {"error": "MalformedBody"}
    assert not [r for r in caplog.records if r.name == "webapp.client"]


def test_reports_are_rate_limited_per_ip(client):
    with freeze_time("2026-02-02 10:00:00"):
        statuses = [client.post("/auth/_log", json={"message": "m"}).status_code for _ in range(61)]
    assert statuses[:60] == [204] * 60 and statuses[60] == 429
