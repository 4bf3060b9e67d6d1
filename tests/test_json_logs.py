"""Logs for a machine: AUTH_LOG_FORMAT=json writes every line as one JSON object, with the
same redaction and encoding as the text format (docs/how-to/operate.md, "Logs in JSON";
docs/security.md, "Logs")."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from webapp import create_app
from webapp.settings import ConfigError, load_settings
from webapp.telemetry import jsonlines, logsafe
from webapp.telemetry.logs import access_log

from .support.config import TEST_SECRET, base_config
from .support.mail import EmailActions, Mailbox, link_of
from .support.servers import run_server

ROOT = Path(__file__).resolve().parent.parent
#: Every key a line may have: the ones each line has, the access line's, a traceback.
LINE_KEYS = {"time", "level", "logger", "request_id", "message"}
ACCESS_KEYS = {"client", "method", "path", "protocol", "status", "bytes", "duration_ms"}
ALLOWED_KEYS = LINE_KEYS | ACCESS_KEYS | {"user_agent", "exc_info", "stack_info"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

#: A value for each parameter the text format redacts (logsafe.SECRET_PARAMS).
PARAM_SECRETS = {name: f"SECRET{i}{name.upper()}" for i, name in enumerate(logsafe.SECRET_PARAMS)}
#: The ways of sending them tests/test_log_safety.py checks the text format against: a
#: percent-encoded or upper-case name, a ";" separator, a repeated parameter.
TRICKY_QUERIES = {
    "SECRETPERCENT": "%74oken=SECRETPERCENT&x=1",
    "SECRETUPPER": "TOKEN=SECRETUPPER",
    "SECRETSEMICOLON": "x=1;code=SECRETSEMICOLON",
    "SECRETREPEATED": "state=a&state=SECRETREPEATED",
}
#: What a client sends to forge a line or a key: quotes, a line break, U+2028.
FORGERY = '"}\n{"level":"CRITICAL","message":"FORGED"\u2028'


@contextlib.contextmanager
def own_logging() -> Iterator[None]:
    """Logging as in a process nobody set up (the development server, a worker): the app's
    ``init_app`` installs its own handler. What it changed is put back afterwards."""
    root, werkzeug = logging.getLogger(), logging.getLogger("werkzeug")
    saved = root.handlers[:], root.level, access_log.level, werkzeug.filters[:]
    root.handlers.clear()
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        access_log.setLevel(saved[2])
        werkzeug.filters[:] = saved[3]


@contextlib.contextmanager
def writing_to(stream: io.StringIO) -> Iterator[None]:
    """Build an app inside: the handler it installs writes on ``stream`` (the standard error
    stream when it was made), start-up lines included."""
    with contextlib.redirect_stderr(stream):
        yield
    [handler] = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler) and handler.stream is stream


def drive(app: Flask, mailbox: Mailbox) -> dict[str, Any]:
    """Requests that log, each with a secret the text format hides: an e-mail sign-in (the
    link's token in the URL), an OAuth callback's code and state, every secret parameter,
    an unexpected error (a traceback), and hostile values. Returns the secrets and the
    answers."""

    def boom() -> str:
        raise RuntimeError("boom")

    app.add_url_rule("/test-boom", "test_boom", boom)
    client = app.test_client()
    answers = {}
    email = EmailActions(client)
    assert email.request_link("ann@example.com").status_code == 302
    link = link_of(mailbox.last())
    answers["link"] = email.open_link(link)
    answers["confirm"] = email.confirm(link)
    assert email.session_email() == "ann@example.com"
    answers["callback"] = client.get(
        f"/auth/callback/github?code={PARAM_SECRETS['code']}&state={PARAM_SECRETS['state']}"
    )
    every = "&".join(f"{name}={value}" for name, value in PARAM_SECRETS.items())
    answers["every"] = client.get(f"/auth/callback/email?{every}&email=a%40b.c")
    for secret, query in TRICKY_QUERIES.items():
        answers[secret] = client.get(f"/auth/signin?{query}")
    answers["boom"] = client.get(f"/test-boom?token={PARAM_SECRETS['token']}")
    answers["hostile"] = client.get(
        f"/auth/signin/x{quote(FORGERY)}?callbackUrl={quote(FORGERY)}",
        headers={"User-Agent": 'probe" "level":"CRITICAL\x85FORGED'},
    )
    answers["beacon"] = client.post("/auth/_log", json={"code": FORGERY, "message": FORGERY})
    for answer in answers.values():
        answer.close()
    session = client.get_cookie("auth.session-token")
    assert session is not None
    secrets = [
        parse_qs(urlsplit(link).query)["token"][0],
        session.value,
        *PARAM_SECRETS.values(),
        *TRICKY_QUERIES,
    ]
    return {"answers": answers, "secrets": secrets}


def strings_in(value: Any) -> Iterator[str]:
    """Every key and string value in decoded lines."""
    if isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


def parsed(text: str) -> list[dict[str, Any]]:
    """Each line of ``text`` as the object it must be, one per line whatever splits them."""
    assert text.isascii() and text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == text.count("\n"), "a line break other than \\n"
    objects = [json.loads(line) for line in lines]
    assert all(isinstance(o, dict) for o in objects)
    return objects


def test_every_line_is_one_json_object_with_no_secret_the_text_format_hides(email_app, mailbox):
    presets = {"AUTH_GITHUB_ID": "gh-client", "AUTH_GITHUB_SECRET": "gh-secret"}
    outputs, runs = {}, {}
    for log_format in ("text", "json"):
        stream = io.StringIO()
        with own_logging():
            with writing_to(stream):
                app = email_app(AUTH_LOG_FORMAT=log_format, **presets)
            access_log.setLevel(logging.INFO)  # the text format's, as the production server's
            runs[log_format] = drive(app, mailbox)
            if log_format == "json":
                # A value no call site encoded (a bug there) still cannot break the line.
                logging.getLogger("webapp.test").warning("raw %s", FORGERY)
        outputs[log_format] = stream.getvalue()
        mailbox.reset()
    text, output, driven = outputs["text"], outputs["json"], runs["json"]
    assert runs["text"]["secrets"] and not [s for s in runs["text"]["secrets"] if s in text]
    lines = parsed(output)
    assert driven["secrets"] and not [
        s for s in driven["secrets"] if s in output or any(s in x for x in strings_in(lines))
    ]
    for line in lines:
        assert LINE_KEYS <= set(line) <= ALLOWED_KEYS
        assert TIME.match(line["time"]) and line["level"] in ("INFO", "WARNING", "ERROR")
    # The forgery stays inside the strings that carry it.
    assert not [x for x in lines if x["level"] == "CRITICAL" or x["message"] == "FORGED"]
    [raw] = [x for x in lines if x["logger"] == "webapp.test"]
    assert raw["message"] == f"raw {FORGERY}"
    [beacon] = [x for x in lines if x["logger"] == "webapp.client"]
    assert f"code={logsafe.encode(FORGERY, quote=True)}" in beacon["message"]

    access = {x["request_id"]: x for x in lines if x["logger"] == "webapp.access"}
    for answer in driven["answers"].values():
        rid = answer.headers["X-Request-ID"]
        line = access[rid]
        assert type(line["status"]) is int and line["status"] == answer.status_code
        assert ACCESS_KEYS <= set(line) and type(line["duration_ms"]) is float
    every = access[driven["answers"]["every"].headers["X-Request-ID"]]
    assert every["method"] == "GET" and every["path"] == (
        "/auth/callback/email?"
        + "&".join(f"{name}=[redacted]" for name in PARAM_SECRETS)
        + "&email=a%40b.c"
    )
    hostile = access[driven["answers"]["hostile"].headers["X-Request-ID"]]
    assert hostile["user_agent"] == 'probe" "level":"CRITICAL\\x85FORGED'
    assert logsafe.encode(FORGERY) in hostile["path"]

    boom = driven["answers"]["boom"]
    assert boom.status_code == 500
    [error] = [x for x in lines if "exc_info" in x]
    assert error["request_id"] == boom.headers["X-Request-ID"] and error["level"] == "ERROR"
    assert error["exc_info"].startswith("Traceback (most recent call last):")
    assert error["exc_info"].endswith("RuntimeError: boom")
    # A line is about a request answered (its access line has the same id) or about none.
    assert {x["request_id"] for x in lines} - {"-"} <= set(access)


def test_under_the_development_server_the_access_line_stands_in_for_werkzeug_s(make_app):
    stream = io.StringIO()
    with own_logging():
        with writing_to(stream):
            app = make_app(AUTH_LOG_FORMAT="json")
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            r = requests.get(
                f"http://127.0.0.1:{server.server_port}/auth/callback/email?token=SECRETDEV1",
                allow_redirects=False,
                timeout=10,
            )
            # A request refused before the app: werkzeug's own lines, in JSON too.
            with socket.create_connection(("127.0.0.1", server.server_port)) as sock:
                sock.sendall(b"GET /x?token=SECRETDEV2 bad HTTP/1.1\r\n\r\n")
                assert sock.recv(100).startswith(b"HTTP/1.1 400")
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
    output = stream.getvalue()
    lines = parsed(output)
    [access] = [x for x in lines if x["logger"] == "webapp.access"]
    assert access["request_id"] == r.headers["X-Request-ID"]
    assert access["status"] == r.status_code == 307  # to AUTH_URL's host, localhost
    assert access["path"] == "/auth/callback/email?token=[redacted]"
    refused = [x["message"] for x in lines if x["logger"] == "werkzeug" and "400" in x["message"]]
    assert refused and all("token=[redacted]" in m for m in refused)
    assert "SECRETDEV" not in output


def test_the_json_formatter_keeps_its_keys_and_shows_an_exception_on_the_same_line():
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "a %s", ("b\nc",), None)
    record.fields = {"message": "forged", "status": 200}
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        record.exc_info = sys.exc_info()
    line = jsonlines.JsonLines().format(record)
    assert "\n" not in line
    decoded = json.loads(line)
    assert decoded["message"] == "a b\nc" and decoded["status"] == 200
    assert decoded["request_id"] == "-" and decoded["logger"] == "x"
    assert decoded["exc_info"].endswith('ValueError: bad "value"\nsecond line')


def test_the_json_formatter_imports_the_standard_library_only():
    """The production server's own process loads it from its file, without the app."""
    tree = ast.parse(Path(jsonlines.__file__).read_text())
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names | {"__future__"}


def test_the_text_format_stays_the_default(database_url):
    assert load_settings({}, {"APP_ENV": "development"}).log_format == "text"
    stream = io.StringIO()
    with own_logging():
        with writing_to(stream):
            create_app(base_config(database_url), environ={})
        logging.getLogger("webapp.test").info("hello")
        assert access_log.level == logging.WARNING  # off, as before
    assert stream.getvalue().endswith(" INFO [-] webapp.test: hello\n")


@pytest.mark.parametrize("value", ["xml", "JSON lines", "1"])
def test_a_bad_value_stops_start_up_naming_the_setting(database_url, value):
    with pytest.raises(ConfigError) as raised:
        create_app(base_config(database_url, AUTH_LOG_FORMAT=value), environ={})
    message = str(raised.value)
    assert message.startswith("AUTH_LOG_FORMAT must be one of text, json")
    assert repr(value) in message and len(message.splitlines()) == 1


def test_the_setting_comes_from_the_toml_file_and_the_environment_wins(tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text('[auth]\nlog_format = "json"\n')
    environ = {"APP_ENV": "development", "AUTH_CONFIG": str(path)}
    assert load_settings(environ).log_format == "json"
    assert load_settings({**environ, "AUTH_LOG_FORMAT": "Text"}).log_format == "text"
    path.write_text('[auth]\nlog_format = "yaml"\n')
    with pytest.raises(ConfigError, match="AUTH_LOG_FORMAT must be one of text, json"):
        load_settings(environ)


def _lines_of(path: Path, waiting_for: str) -> list[dict[str, Any]]:
    for _ in range(50):
        if waiting_for in path.read_text():
            break
        time.sleep(0.1)
    return parsed(path.read_text())


def test_the_production_server_writes_json_lines(tmp_path):
    with run_server(tmp_path, AUTH_LOG_FORMAT="json") as server:
        r = requests.get(
            f"{server.url}/auth/callback/email?token=SECRETTOKEN9&email=a%40b.c",
            headers={"User-Agent": 'probe "q"'},
            allow_redirects=False,
            timeout=5,
        )
        rid = r.headers["X-Request-ID"]
        out = _lines_of(server.access_log, rid)
    errors = parsed(server.error_log.read_text())  # the app's lines
    [access] = [x for x in out if x["request_id"] == rid and x["logger"] == "webapp.access"]
    assert access["status"] == r.status_code == 302 and access["user_agent"] == 'probe "q"'
    assert access["path"] == "/auth/callback/email?token=[redacted]&email=a%40b.c"
    assert {x["logger"] for x in out} >= {"_granian", "webapp.access"}  # granian's own too
    assert any(x["request_id"] == rid for x in errors)  # the expired link's warning
    both = server.access_log.read_text() + server.error_log.read_text()
    assert "SECRETTOKEN9" not in both


def test_the_production_server_stops_on_a_bad_value_naming_it(tmp_path):
    env = {
        **os.environ,
        "APP_ENV": "production",
        "AUTH_SECRET": TEST_SECRET,
        "AUTH_URL": "http://127.0.0.1:9/auth",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "EMAIL_SERVER": "smtp://127.0.0.1:2525",
        "AUTH_LOG_FORMAT": "xml",
        "PORT": "0",
    }
    started = subprocess.run(
        [sys.executable, "deploy/serve.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 1 and started.stdout == ""
    assert started.stderr.strip().splitlines() == [
        "error: AUTH_LOG_FORMAT must be one of text, json; got 'xml'"
    ]
