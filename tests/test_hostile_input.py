"""Hostile input on every route, every method and every field (issue 14).

The routes come from ``app.url_map``, so a new route is covered without editing this file;
the only rule left out is ``static`` (Flask's ``send_from_directory`` over webapp/static: no
code of ours runs there, and its path handling is Werkzeug's ``safe_join``). Every route is
sent, signed out and signed in (a real session from the demo sign-in), with a valid CSRF
token (so that the input reaches the view) and, for POST, without one; a provider id
parameter takes each configured provider (demo credentials, e-mail, passkeys, an OpenID
Connect provider with back-channel logout and device sign-in, a SAML provider), a row id
another user's row:

* the fields (``hostile_corpus.all_fields``: every name webapp/ reads from a query, form or
  JSON body, and issue 14's standard set) with each class of ``VALUE_CLASSES``: over-long
  (20,000 characters, 1 MB), NUL, CR/LF, bidi controls, invalid UTF-8 and a lone surrogate
  (percent-encoded in the query, raw bytes in the body), duplicated and array-shaped; in
  the query, and for POST in the query and the form body; also as htmx sends them;
* JSON bodies with every field of the wrong kind (list, number, null, object, …);
* whole bodies: nesting 100,000 deep (``[`` and ``{"a":``) and as deep as fits under
  MAX_CONTENT_LENGTH (64 KiB; the 100,000 levels are over it), JSON of the wrong type,
  invalid UTF-8, lying content types, multipart, 5,000 fields, bodies over the limit;
* bad cookies (garbage, over-long, NUL, CR/LF, invalid UTF-8, not base64, forged sealed and
  signed values, a session token that names nothing, a genuine cookie moved to another
  name) under every cookie name webapp/ declares, the OAuth checks' cookies and the SAML
  requests' (a genuine one, and any name of their prefix);
* bad headers, for every header webapp/ reads (Origin, Referer, Host, X-Request-ID, …);
* hostile path parameters (99999999999999999999999, 2^63, -1, 0, 1e9999, 00001, the other
  user's id with leading zeros, %00, %0a, ../, non-ASCII digits) and path suffixes;
* the methods each route does not allow (PUT, PATCH, DELETE, OPTIONS, TRACE, PROPFIND).

A value class goes first into every field at once; the app's query, form and JSON mappings
note which names the view looked up, and each field it read then gets every class on its
own (and any field that leads it to). A field nothing reads only goes with the others. An
all-at-once request that fails is repeated one field (cookie, header) at a time, so that a
failure names the field. HEAD (the GET view), OPTIONS (Flask's own answer) and a POST
without a token (the CSRF check, the same for every route) get the all-at-once requests only.

Each class of failure is its own test, per route and method, so that they fail apart:
``test_no_server_error`` (a 5xx, or an exception out of the app; a 503 with Retry-After
from a database outage would be acceptable, but no database is down here),
``test_no_bare_page`` (Werkzeug's default page, or an answer that is neither the app's page
nor JSON), ``test_no_secret_or_traceback``, ``test_no_write``, ``test_no_warning`` (a warning
out of the app: an error under this project's filterwarnings=error, though not a 5xx in
production) and ``test_input_is_not_printed_as_text`` (a page showing the request's text as
its own words, such as an error "code" that is any text). A failure line names the method,
path, field (cookie, header, body, path parameter) and value class, signed in or out, with
or without the token, the status and, for a 5xx, the exception and where it was raised. The
requests of one route and method are sent once and shared by its tests.

Nothing may be written. After every request that ran an INSERT, UPDATE or DELETE, and after
every block of requests in any case, every table's rows (counts and contents, as stored)
are compared with the seeded ones; a change is reported and the seeded rows are put back.
The development outbox counts as a table: a message sent is a write. Excluded, by design:

* ``rate_limit_counters``: a throttle counts an attempt before it decides on it, on its own
  connection, so that a burst cannot slip through (webapp/audit/throttles.py);
* ``auth_events``: a refused request is recorded in the audit trail whatever becomes of
  its other writes (webapp/audit/trail.py). ``test_the_audit_trail_holds_refusals_only``
  checks what it gained: refusals (and the sign-out above), no secret, and the request's
  text only where a row keeps it by design (the device read from ``User-Agent``, the
  request id from ``X-Request-ID``);
* on ``POST {base}/signout`` with a token that passed the CSRF check, the deletion of the
  signed-in browser's own session row: signing out is the route's purpose;
* on ``POST {base}/device/<id>`` with a token that passed the CSRF check, one new
  ``device_requests`` row of that provider holding nothing of the input: starting a device
  sign-in keeps its request as a row (webapp/flows/signin/device.py).

Throttles are set out of reach and each request comes from an address of its own: a
throttle would stop the input before the code it is aimed at (they have their own tests).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from flask import Flask, g, request, request_finished, request_started
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.test import EnvironBuilder, run_wsgi_app

from webapp import create_app
from webapp.browser_state import oauth_checks, saml_requests
from webapp.providers import providers
from webapp.storage.database import driver_statement
from webapp.storage.db import db
from webapp.storage.models import Authenticator

from .saml.static_idp import idp_metadata_file
from .support.config import SIGNIN_THROTTLES, TEST_SECRET, base_config
from .support.databases import empty_tables
from .support.hostile_corpus import (
    COOKIE_CLASSES,
    GATE_HEADERS,
    HEADER_CLASSES,
    ID_VALUES,
    JSON_VALUE_CLASSES,
    MARKER,
    PATH_SUFFIXES,
    TEXT_VALUES,
    TRACEBACK_MARKERS,
    VALUE_CLASSES,
    ValueClass,
    all_fields,
    body_cases,
    declared_cookies,
    discovered_headers,
    printed_input,
    unreadable,
)
from .support.oauth import SECRET as IDP_CLIENT_SECRET
from .support.oauth import FakeIdP, write_providers_toml
from .support.routes import OTHER, PARAM, PROBED_METHODS, TARGETS, Target
from .support.rows import NewSession
from .support.signin import demo_sign_in

FIELDS = all_fields()
SIGNED_OUT, SIGNED_IN = "signed out", "signed in"
FORM = "application/x-www-form-urlencoded"
#: The status noted when an exception left the app (a WSGI server answers 500 then).
RAISED = 599
#: The development outbox's files count as a table: a message sent is a write.
OUTBOX = "outbox (e-mail)"
#: Written by design whatever the decision (see the module docstring).
EXCLUDED_TABLES = frozenset({"rate_limit_counters", "auth_events"})
#: Throttles out of reach (each request also comes from its own address).
NO_THROTTLES = {name: "1000000/1h" for name in SIGNIN_THROTTLES}
#: The state the cookie cases name, so that an OAuth callback looks for their cookies.
COOKIE_STATE = MARKER + "-state"
#: The bodies a GET gets (see Hostile._bodies).
GET_BODIES = frozenset(
    {
        "json-nested-100k-lists",
        "json-top-list",
        "json-top-null",
        "json-invalid-utf8",
        "over-limit-json",
        "multipart-garbage",
    }
)
#: The most failure lines one assertion message lists.
MAX_LINES = 60


# -- requests and answers -------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One request: ``what`` names its hostile part (field, body, cookie, path, method)."""

    what: str
    method: str
    path: str
    auth: str
    #: "valid": the CSRF cookie and the X-CSRFToken header (and the form field in a form
    #: body the probe built); "none": neither.
    token: str
    query: str = ""
    body: bytes | None = None
    content_type: str | None = None
    cookies: tuple[tuple[str, str], ...] = ()
    #: Request headers, as WSGI environ keys (HTTP_ORIGIN), over the usual ones.
    headers: tuple[tuple[str, str], ...] = ()
    #: Makes the one-field (one-cookie) probes to send when this all-at-once probe fails.
    split: Callable[[], Iterable[Probe]] | None = field(default=None, compare=False)

    def line(self) -> str:
        path = self.path if len(self.path) <= 90 else self.path[:80] + f"…({len(self.path)})"
        query = f"?{self.query[:60]}…" if len(self.query) > 60 else self.query and "?" + self.query
        return f"{self.method} {path}{query} [{self.what}; {self.auth}; csrf {self.token}]"


@dataclass
class Outcome:
    probe: Probe
    status: int
    content_type: str = ""
    body: bytes = b""
    #: The exception behind a 5xx (or raised out of the app), and where.
    cause: str = ""
    #: What the request changed that it must not have.
    written: str = ""
    endpoint: str | None = None
    #: Warnings the app raised (each an error under the project's filterwarnings=error).
    warnings: str = ""
    #: The field names the app looked up ("json:<name>" in a JSON body).
    reads: frozenset[str] = frozenset()
    #: What is wrong with the answer, by kind (``failures``).
    problems: dict[str, str] = field(default_factory=dict)

    def failures(self, leaks: Leaks) -> dict[str, str]:
        found = {}
        if self.status >= 500:
            found["server_error"] = self.cause or "no exception logged"
        # An exception out of the app (599) left no answer to read: a server error only.
        reason = self.status != RAISED and unreadable(
            self.status, self.content_type, self.body, self.probe.method
        )
        if reason:
            found["bare_page"] = reason
        leaked = leaks.find(self.body)
        if leaked:
            found["leak"] = leaked
        if self.written:
            found["write"] = self.written
        printed = printed_input(self.status, self.content_type, self.body)
        if printed:
            found["printed"] = repr(printed)
        if self.warnings:
            found["warning"] = self.warnings
        return found


class Leaks:
    """What no answer may show: a traceback, a driver's error, and each secret by name."""

    def __init__(self, secrets: dict[str, bytes]) -> None:
        self.names = {m: m.decode() for m in TRACEBACK_MARKERS}
        self.names.update({v: f"the {k}" for k, v in secrets.items() if v})
        self.pattern = re.compile(b"|".join(re.escape(m) for m in self.names))

    def find(self, body: bytes) -> str:
        return ", ".join(sorted({self.names[m] for m in self.pattern.findall(body)}))


def _where(exc_info: Any) -> str:
    """``Type: message at file:line`` of the last frame in webapp/ (or the last frame)."""
    exc_type, exc, tb = exc_info
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "/webapp/" in f.filename] or frames
    place = f" at {Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else ""
    message = str(exc).splitlines()[0][:160] if str(exc) else ""
    return f"{exc_type.__name__}: {message}{place}"


class _ErrorRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


#: What the request being sent looked up: (id of the mapping, name), or None.
_READ: set[tuple[int, str]] | None = None


def _note(mapping: object, key: Any) -> None:
    if _READ is not None and isinstance(key, str):
        _READ.add((id(mapping), key))


class _ReadFields(ImmutableMultiDict[str, str]):
    """The app's query and form mappings, noting each name looked up (present or not)."""

    def __getitem__(self, key: str) -> str:
        _note(self, key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        _note(self, key)
        return super().__contains__(key)

    def getlist(self, key: str, type: Any = None) -> list[Any]:
        _note(self, key)
        return super().getlist(key, type)  # type: ignore[call-overload, no-any-return]


class _ReadJson(dict[str, Any]):
    """A JSON object the app parsed, noting each name looked up."""

    def __getitem__(self, key: str) -> Any:
        _note(_ReadJson, key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        _note(_ReadJson, key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        _note(_ReadJson, key)
        return super().__contains__(key)


def _note_reads(app: Flask) -> None:
    """Let the app's requests tell which fields a view read: the sweep then sends each of
    those on its own (the others only together). The mappings behave as before."""

    class Request(app.request_class):  # type: ignore[name-defined, misc]
        parameter_storage_class = _ReadFields

    app.request_class = Request
    loads = app.json.loads

    def noting_loads(s: str | bytes, **kwargs: Any) -> Any:
        parsed = loads(s, **kwargs)
        # The fields a view looks up are the top-level object's.
        return _ReadJson(parsed) if type(parsed) is dict else parsed

    app.json.loads = noting_loads  # type: ignore[method-assign]


# -- the app, the provider and the seeded rows ----------------------------------------------


@dataclass
class World:
    """The rows every request starts from, and the cookies of the signed-in browser."""

    session_token: str
    csrf_token: str
    csrf_cookie: str
    #: Row ids of another user's account, session and passkey: the ids path parameters get.
    victim_ids: dict[str, int]
    #: Cookies the app really set (OAuth checks, passkey challenge, device handle, …).
    genuine: dict[str, str]
    baseline: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)


class Hostile:
    """The app of one database, the requests sent to it and what came back."""

    def __init__(self, app: Flask, outbox: Path, database_url: str) -> None:
        self.app = app
        self.outbox = outbox
        self.world: World | None = None
        self.audit_start = 0
        self.sweeps: dict[Target, list[Outcome]] = {}
        self.outcomes: list[Outcome] = []
        self.writes: list[str] = []
        self.endpoint: str | None = None
        self.csrf_passed = False
        self.mappings: dict[int, str] = {}
        self.address = 0
        self.database_url = database_url
        self.errors = _ErrorRecords()
        _note_reads(app)
        with app.app_context():
            self.engine = db.engine
            self.provider_ids = tuple(providers())
            self.tables = [t for t in db.metadata.sorted_tables if t.name not in EXCLUDED_TABLES]
        # Thousands of throttle counts commit one by one: without waiting for the disk.
        # Durability is no part of what is tested here.
        sa.event.listen(self.engine, "connect", _no_fsync)
        self.engine.dispose()
        sa.event.listen(self.engine, "before_cursor_execute", self._statement)
        driver_statement.connect(self._driver_statement)
        request_started.connect(self._started, app)
        request_finished.connect(self._finished, app)
        self.leaks = Leaks({})
        self.body_cases = body_cases(int(app.config["MAX_CONTENT_LENGTH"]))

    def close(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._statement)
        sa.event.remove(self.engine, "connect", _no_fsync)
        driver_statement.disconnect(self._driver_statement)
        request_started.disconnect(self._started, self.app)
        request_finished.disconnect(self._finished, self.app)

    # What the app did during a request.

    _WRITE = re.compile(
        r"^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+\"?(\w+)",
        re.IGNORECASE,
    )

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        match = self._WRITE.match(statement)
        if match and match[1] not in EXCLUDED_TABLES:
            self.writes.append(statement)

    def _driver_statement(self, _sender: Any, *, statement: str) -> None:
        self._statement(None, None, statement)

    def _started(self, _sender: Any, **_: Any) -> None:
        self.endpoint = request.endpoint

    def _finished(self, _sender: Any, **_: Any) -> None:
        self.csrf_passed = bool(g.get("csrf_valid", False))
        # Which of the mappings looked up was the query and which the form (both are parsed
        # by now if anything looked them up).
        for part in ("args", "form"):
            if part in request.__dict__:  # parsed: the app (or Flask) looked at it
                self.mappings[id(request.__dict__[part])] = "query" if part == "args" else "form"

    # The seeded rows.

    def ensure_world(
        self,
        user_factory: Callable[..., int],
        account_factory: Callable[..., int],
        session_factory: Callable[..., NewSession],
    ) -> World:
        if self.world is not None:
            return self.world
        app = self.app
        now = datetime.now(UTC)
        # Another user's rows come first, so that no id the corpus names (00001) is the
        # signed-in user's own: ending or unlinking one of those would be a legitimate write.
        victim = user_factory(app, email="victim@example.com", name="Victim", email_verified=now)
        victim_account = account_factory(app, victim, provider="fake")
        victim_session = session_factory(app, victim)
        with app.app_context():
            passkey = Authenticator(
                user_id=victim,
                credential_id="victim-credential",
                public_key="victim-public-key",
                sign_count=0,
                backed_up=False,
                device_type="single_device",
                name="Victim's key",
            )
            db.session.add(passkey)
            db.session.commit()
            passkey_id = int(passkey.id)
        browser = app.test_client()
        genuine: dict[str, str] = {}

        def keep(response: Any) -> Any:
            for header in response.headers.getlist("Set-Cookie"):
                name, _, rest = header.partition("=")
                value = rest.split(";", 1)[0]
                if value:
                    genuine[name] = value
            return response

        # A real session, through the sign-in routes.
        signed = keep(demo_sign_in(browser))
        assert signed.status_code == 302 and "error" not in signed.headers["Location"]
        token = browser.get_cookie("auth.session-token")
        csrf_cookie = browser.get_cookie("auth.csrf-token")
        assert token is not None and csrf_cookie is not None
        csrf = browser.get("/auth/csrf").json["csrfToken"]  # type: ignore[index]
        # The set-up key of an authenticator app: GET /account/two-factor makes it once and
        # shows it again afterwards (a GET that only reads from here on).
        assert browser.get("/account/two-factor").status_code == 200
        # Genuine cookies of each kind, to move under other names.
        started = keep(browser.post("/auth/signin/fake", data={"csrfToken": csrf}))
        assert started.status_code == 302, started.status_code
        # A SAML AuthnRequest's cookie (its name ends with a digest of the request's ID).
        saml = keep(browser.post("/auth/signin/saml", data={"csrfToken": csrf}))
        assert saml.headers["Location"].startswith("https://idp.invalid/sso?"), saml.headers
        keep(browser.get("/auth/webauthn-options/passkey?action=authenticate"))
        device = keep(browser.post("/auth/device/fake", data={"csrfToken": csrf}))
        assert device.status_code == 303, device.headers.get("Location")
        self.world = World(
            session_token=token.value,
            csrf_token=csrf,
            csrf_cookie=csrf_cookie.value,
            victim_ids={
                "account_id": victim_account,
                "session_id": victim_session.id,
                "passkey_id": passkey_id,
            },
            genuine=genuine,
        )
        self.world.baseline = self._snapshot()
        with self.engine.connect() as conn:
            # The audit trail's last row before any hostile request (the world's sign-in).
            self.audit_start = int(
                conn.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM auth_events")).scalar_one()
            )
        self.leaks = Leaks(
            {
                "AUTH_SECRET": TEST_SECRET.encode(),
                "Flask SECRET_KEY": app.config["SECRET_KEY"].encode(),
                "provider's client secret": IDP_CLIENT_SECRET.encode(),
                "signed-in session token": token.value.encode(),
                "victim's session token": victim_session.token.encode(),
                "victim's session token hash": victim_session.token_hash.encode(),
                "database URL": self.database_url.encode(),
            }
        )
        with app.app_context():
            self.cookie_names = self._cookie_names(genuine)
        # The CSRF token's headers are configuration (Flask-WTF reads them by name).
        csrf_headers = tuple(app.config["WTF_CSRF_HEADERS"])
        self.headers = tuple(sorted({*discovered_headers(), *csrf_headers}))
        return self.world

    def _cookie_names(self, genuine: dict[str, str]) -> tuple[str, ...]:
        names = set(genuine)
        for name in declared_cookies():
            names.add(name)
            # A prefix such as auth.device takes a provider id.
            names.update(f"{name}.{pid}" for pid in self.provider_ids)
        # The OAuth checks' cookies of the state the cookie cases send.
        with self.app.test_request_context():
            for pid in self.provider_ids:
                for item in oauth_checks.ITEMS:
                    names.add(oauth_checks._name(pid, item, COOKIE_STATE))
                # The SAML requests' cookies are read by their prefix, whatever follows.
                for logout in (False, True):
                    names.add(saml_requests._prefix(pid, logout) + MARKER)
        return tuple(sorted(names))

    def _snapshot(self) -> dict[str, tuple[tuple[Any, ...], ...]]:
        """Every row of every table (but the excluded) as stored, and the outbox's files."""
        rows: dict[str, tuple[tuple[Any, ...], ...]] = {}
        with self.engine.connect() as conn:
            for table in self.tables:
                found = conn.execute(sa.text(f'SELECT * FROM "{table.name}"')).all()
                rows[table.name] = tuple(sorted((tuple(r) for r in found), key=repr))
        rows[OUTBOX] = tuple((n,) for n in sorted(os.listdir(self.outbox)))
        return rows

    def _restore(self, changed: set[str]) -> None:
        """Put the seeded rows back into the tables in ``changed`` (all of them when users
        changed: a user's rows go with it), as they were stored."""
        assert self.world is not None
        base = self.world.baseline
        if OUTBOX in changed:
            for name in os.listdir(self.outbox):
                if (name,) not in base[OUTBOX]:
                    (self.outbox / name).unlink()
        tables = [t for t in self.tables if "users" in changed or t.name in changed]
        if not tables:
            return
        with self.engine.begin() as conn:
            for table in reversed(tables):
                conn.execute(sa.text(f'DELETE FROM "{table.name}"'))
            for table in tables:
                keys = [c.name for c in table.columns]
                columns = ", ".join(f'"{k}"' for k in keys)
                values = ", ".join(":" + k for k in keys)
                insert = sa.text(f'INSERT INTO "{table.name}" ({columns}) VALUES ({values})')
                rows = [dict(zip(keys, r, strict=True)) for r in base[table.name]]
                if rows:
                    conn.execute(insert, rows)

    def _changes(self) -> dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]]:
        assert self.world is not None
        now = self._snapshot()
        base = self.world.baseline
        return {name: (base[name], rows) for name, rows in now.items() if rows != base[name]}

    def _allowed(self, outcome: Outcome, changes: dict[str, Any]) -> bool:
        """The writes a route makes by design (module docstring): the signed-in browser's
        own sign-out, and a device sign-in's row."""
        assert self.world is not None
        if not self.csrf_passed:
            return False
        if outcome.endpoint == "auth.signout_submit" and set(changes) == {"sessions"}:
            before, after = changes["sessions"]
            own = [r for r in before if r not in after]
            return set(after) <= set(before) and len(own) == 1 and MARKER not in repr(after)
        if outcome.endpoint == "auth.device_start" and set(changes) == {"device_requests"}:
            before, after = changes["device_requests"]
            new = [r for r in after if r not in before]
            return set(before) <= set(after) and len(new) == 1 and MARKER not in repr(new)
        return False

    def check_block(self, what: str, probe: Probe) -> None:
        """Compare every table with the seeded rows; report and undo a change."""
        changes = self._changes()
        if changes:
            outcome = Outcome(probe, 0, written=_describe(changes) + f" (found after {what})")
            outcome.problems = {"write": outcome.written}
            self.outcomes.append(outcome)
            self._restore(set(changes))

    # Sending.

    def send(self, probe: Probe) -> Outcome:
        world = self.world
        assert world is not None
        cookies: dict[str, str] = {}
        headers: dict[str, str] = {}
        if probe.auth == SIGNED_IN:
            cookies["auth.session-token"] = world.session_token
        if probe.token == "valid":
            cookies["auth.csrf-token"] = world.csrf_cookie
            headers["X-CSRFToken"] = world.csrf_token
        cookies.update(probe.cookies)
        self.address += 1
        environ = {
            "REMOTE_ADDR": f"10.{self.address >> 16 & 255}.{self.address >> 8 & 255}."
            f"{self.address & 255}",
            "HTTP_COOKIE": "; ".join(f"{k}={v}" for k, v in cookies.items()),
        }
        self.writes.clear()
        self.errors.records.clear()
        self.endpoint = None
        self.csrf_passed = False
        self.mappings = {}
        # Werkzeug's own runner, not the test client: the client parses every request's
        # URL back (uri_to_iri), which costs more than the request on a 1 MB query.
        global _READ
        _READ = read = set()
        builder = EnvironBuilder(
            path=probe.path,
            method=probe.method,
            query_string=probe.query or None,
            data=probe.body,
            content_type=probe.content_type,
            headers=headers,
            environ_base=environ,
            environ_overrides=dict(probe.headers),
        )
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                app_iter, status, answer = run_wsgi_app(self.app, builder.get_environ(), True)
                body = b"".join(app_iter)
            except Exception as exc:  # out of the app: what a server answers with a 500
                outcome = Outcome(probe, RAISED, cause="raised " + _where(sys_exc_info(exc)))
            else:
                content_type = answer.get("Content-Type", "")
                outcome = Outcome(probe, int(status.split()[0]), content_type, body)
                if self.errors.records:
                    outcome.cause = _where(self.errors.records[-1].exc_info)
        builder.close()
        _READ = None
        where = {id(_ReadJson): "json", **self.mappings}
        outcome.reads = frozenset(f"{where[m]}:{k}" for m, k in read if m in where)
        outcome.warnings = "; ".join(
            f"{w.category.__name__}: {str(w.message)[:160]} ({Path(w.filename).name}:{w.lineno})"
            for w in warned
        )
        outcome.endpoint = self.endpoint
        if self.writes:
            changes = self._changes()
            if changes:
                if not self._allowed(outcome, changes):
                    outcome.written = _describe(changes)
                self._restore(set(changes))
        return outcome

    def run(self, probe: Probe) -> Outcome:
        outcome = self.send(probe)
        outcome.problems = outcome.failures(self.leaks)
        self.outcomes.append(outcome)
        if probe.split is not None and outcome.problems:
            for part in probe.split():
                self.run(part)
        return outcome

    # What to send.

    def sweep(self, target: Target) -> list[Outcome]:
        if target not in self.sweeps:
            self.outcomes = []
            logger = logging.getLogger("webapp")
            level = logger.level
            logger.setLevel(logging.ERROR)  # the refusals' warnings cost time, say nothing
            logger.addHandler(self.errors)
            try:
                self._sweep(target)
            finally:
                logger.removeHandler(self.errors)
                logger.setLevel(level)
            self.sweeps[target] = self.outcomes
        return self.sweeps[target]

    def _sweep(self, target: Target) -> None:
        if target.method == OTHER:
            self._other_methods(target)
            return
        # HEAD runs the GET view and OPTIONS is Flask's own answer: their fields go all at
        # once (and one at a time only when that fails); bodies, cookies and path
        # parameters, which the GET round sends to the same code, are not repeated.
        full = target.method in ("GET", "POST")
        tokens = ("valid", "none") if target.method == "POST" else ("valid",)
        for path, for_provider in self._paths(target):
            for auth in (SIGNED_OUT, SIGNED_IN):
                served = [
                    self._fields(Probe("no hostile value", target.method, path, auth, token))
                    for token in tokens
                ][0]  # with the token: without one, a POST stops at the CSRF check
                # A provider the route does not serve (404): it parses the request as it
                # does for those it serves, whose rounds send the bodies and cookies.
                if full and (served or not for_provider):
                    base = Probe("no hostile value", target.method, path, auth, "valid")
                    self._bodies(base)
                    self._cookies(base)
                    self._headers(base)
                    self.check_block("the bodies, cookies and headers", base)
        if full:
            self._path_params(target)
            self._path_suffixes(target)

    def _fields(self, base: Probe) -> bool:
        """Each value class in every field at once, then in each field the route read
        (and any field those requests led it to read), one at a time: a GET's from the
        query, a POST's from the query or the form."""
        sources = ("query:",) if base.method == "GET" else ("query:", "form:")
        from_query: set[str] = set()

        def fields(outcome: Outcome) -> set[str]:
            from_query.update(r[6:] for r in outcome.reads if r.startswith("query:"))
            return {r.split(":", 1)[1] for r in outcome.reads if r.startswith(sources)}

        benign = self.run(base)
        read = fields(benign)
        for value in VALUE_CLASSES:
            if not value.in_body and base.method not in ("GET", "POST"):
                continue  # 1 MB: the GET round sends it to the view HEAD runs

            def each(value: ValueClass = value) -> Iterator[Probe]:
                return (self._field(base, name, value) for name in FIELDS)

            read |= fields(self.run(self._all_fields(base, value, each)))
        if base.method not in ("GET", "POST") or base.token == "none":
            # See _sweep for HEAD and OPTIONS. Without a token, a POST stops at the CSRF
            # check, the same code for every route: the fields go all at once.
            read = set()
        done: set[str] = set()
        while read - done:
            name = min(read - done)
            done.add(name)
            for value in VALUE_CLASSES:
                if not value.in_body and name not in from_query:
                    continue  # too large for a body: it goes in the query only
                read |= fields(self.run(self._field(base, name, value)))
        if base.method in ("GET", "POST") and base.token == "valid":
            # As htmx sends them: the account area answers with a section, the device page's
            # poll with a fragment or HX-Redirect.
            htmx = replace(base, headers=(("HTTP_HX_REQUEST", "true"),))
            for value in VALUE_CLASSES:
                if value.in_body:

                    def each_htmx(value: ValueClass = value) -> Iterator[Probe]:
                        return (self._field(htmx, name, value) for name in FIELDS)

                    self.run(self._all_fields(htmx, value, each_htmx))
        self.check_block("the fields", base)
        return benign.status != 404

    def _paths(self, target: Target) -> Iterator[tuple[str, bool]]:
        """The route's path with ordinary parameters (and whether it names a provider):
        every provider id for a provider parameter (each kind of provider reads other
        fields), another user's row for a row id."""
        names = [name for _conv, name in target.params]
        if "provider_id" in names:
            for pid in self.provider_ids:
                yield self._path(target, {"provider_id": pid}), True
        else:
            yield self._path(target, {}), False

    def _path(self, target: Target, given: dict[str, str]) -> str:
        assert self.world is not None

        def value(match: re.Match[str]) -> str:
            conv, name = match[1] or "default", match[2]
            if name in given:
                return given[name]
            if conv == "id":
                return str(self.world.victim_ids.get(name, 4242))  # type: ignore[union-attr]
            return self.provider_ids[0] if name == "provider_id" else "x"

        return PARAM.sub(value, target.pattern)

    def _field(self, base: Probe, name: str, value: ValueClass) -> Probe:
        """``base`` with one field of class ``value``: in the query, and for a POST in the
        form body as well (with the valid token, unless the field is the token)."""
        htmx = " (htmx)" if base.headers else ""
        query = value.query(name)
        if base.method != "POST":
            return replace(base, what=f"field {name}={value.name}{htmx}", query=query)
        parts = []
        if base.token == "valid" and name != "csrfToken":
            parts.append(self._token_field())
        if value.in_body:
            parts.append(value.body(name))
        return replace(
            base,
            what=f"field {name}={value.name} (query and form){htmx}",
            query=query,
            body=b"&".join(parts),
            content_type=FORM,
        )

    def _all_fields(
        self, base: Probe, value: ValueClass, each: Callable[[], Iterable[Probe]]
    ) -> Probe:
        """``base`` with every field of class ``value`` at once; ``each`` makes the
        one-field probes that name the field when this one fails."""
        # With a valid token the form keeps it: a bad one would stop every field at the
        # CSRF check (csrfToken gets its own requests, one field at a time).
        names = [n for n in FIELDS if not (base.token == "valid" and n == "csrfToken")]
        if value.in_body:
            query = "&".join(value.query(name) for name in names)
        else:
            # 1 MB in each of 20-odd fields would be 20-odd MB: the fields share the 1 MB.
            share = MARKER + "x" * ((1 << 20) // len(names))
            query = "&".join(f"{quote(name)}={share}" for name in names)
        body = None
        if base.method not in ("GET", "HEAD"):
            parts = [value.body(name) for name in names] if value.in_body else []
            if base.token == "valid":
                parts.insert(0, self._token_field())
            body = b"&".join(parts)
        htmx = " (htmx)" if base.headers else ""
        return replace(
            base,
            what=f"every field={value.name}{htmx}",
            query=query,
            body=body,
            content_type=FORM if body is not None else None,
            split=each,
        )

    def _token_field(self) -> bytes:
        assert self.world is not None
        return b"csrfToken=" + quote(self.world.csrf_token, safe="").encode()

    def _bodies(self, base: Probe) -> None:
        """Whole bodies, then JSON objects with every field of a wrong kind at once, then
        each JSON name the app read, one at a time."""
        read: set[str] = set()
        cases = self.body_cases
        if base.method == "GET":
            # A GET's body is no form (request.values leaves it out); only its type and
            # size can matter: JSON (the JSON mode), nesting, the size limit.
            cases = [c for c in cases if c[0] in GET_BODIES]
        for name, content_type, body in cases:
            self.run(
                Probe(
                    f"body {name}",
                    base.method,
                    base.path,
                    base.auth,
                    base.token,
                    body=body,
                    content_type=content_type,
                )
            )
        if base.method == "GET":
            return
        for name, value in JSON_VALUE_CLASSES.items():

            def each(name: str = name, value: Any = value) -> Iterator[Probe]:
                return (self._json(base, f, name, value) for f in FIELDS)

            everything = json.dumps(dict.fromkeys(FIELDS, value)).encode()
            outcome = self.run(
                Probe(
                    f"JSON every field={name}",
                    base.method,
                    base.path,
                    base.auth,
                    base.token,
                    body=everything,
                    content_type="application/json",
                    split=each,
                )
            )
            read |= {r.removeprefix("json:") for r in outcome.reads if r.startswith("json:")}
        for f in sorted(read):
            for name, value in JSON_VALUE_CLASSES.items():
                self.run(self._json(base, f, name, value))

    def _json(self, base: Probe, name: str, value_class: str, value: Any) -> Probe:
        return Probe(
            f"JSON field {name}={value_class}",
            base.method,
            base.path,
            base.auth,
            base.token,
            body=json.dumps({name: value}).encode(),
            content_type="application/json",
        )

    def _cookies(self, base: Probe) -> None:
        assert self.world is not None
        names = self.cookie_names
        if base.auth == SIGNED_IN:
            # Keep this browser signed in and its CSRF token good: the other cookies are the
            # point here (the session and CSRF cookies are bad in the signed-out round).
            names = tuple(n for n in names if n not in ("auth.session-token", "auth.csrf-token"))
        genuine = sorted(self.world.genuine.items())
        # A genuine cookie of another name (sealed for another purpose or place), in turn.
        moved = {
            n: [v for g, v in genuine if g != n][i % (len(genuine) - 1)]
            for i, n in enumerate(names)
        }
        for value_class, value in [*COOKIE_CLASSES.items(), ("moved", None)]:

            def bad(name: str, value: str | None = value) -> str:
                return moved[name] if value is None else value

            def each(value_class: str = value_class, bad: Any = bad) -> Iterator[Probe]:
                return (
                    Probe(
                        f"cookie {n}={value_class}",
                        base.method,
                        base.path,
                        base.auth,
                        base.token,
                        query=f"state={COOKIE_STATE}",
                        cookies=((n, bad(n)),),
                    )
                    for n in names
                )

            self.run(
                Probe(
                    f"every cookie={value_class}",
                    base.method,
                    base.path,
                    base.auth,
                    base.token,
                    query=f"state={COOKIE_STATE}",
                    cookies=tuple((n, bad(n)) for n in names),
                    split=each,
                )
            )

    def _headers(self, base: Probe) -> None:
        """Every header the app reads with each bad value: all at once but the gates (host
        and CSRF checks), which go alone; a POST's gates, and the host for every route."""
        gates = [h for h in self.headers if h in GATE_HEADERS]
        others = [h for h in self.headers if h not in GATE_HEADERS]
        if base.method != "POST":
            gates = ["Host"]
        if base.auth == SIGNED_IN:
            gates.remove("Host")  # refused before anything reads the session

        def one(name: str, value_class: str, value: str) -> Probe:
            return replace(
                base, what=f"header {name}={value_class}", headers=((_wsgi_key(name), value),)
            )

        for value_class, value in HEADER_CLASSES.items():

            def each(value_class: str = value_class, value: str = value) -> Iterator[Probe]:
                return (one(name, value_class, value) for name in others)

            every = tuple((_wsgi_key(name), value) for name in others)
            self.run(replace(base, what=f"every header={value_class}", headers=every, split=each))
            for name in gates:
                self.run(one(name, value_class, value))

    def _form(self, method: str) -> tuple[bytes | None, str | None]:
        if method == "POST":
            return self._token_field(), FORM
        return None, None

    def _path_params(self, target: Target) -> None:
        assert self.world is not None
        body, content_type = self._form(target.method)
        for conv, name in target.params:
            if conv == "id":
                victim = self.world.victim_ids.get(name, 4242)
                values: tuple[str, ...] = (*ID_VALUES, f"0000{victim}", f"{victim}%00")
            else:
                values = TEXT_VALUES
            for value in values:
                path = self._path(target, {name: value})
                for auth in (SIGNED_OUT, SIGNED_IN):
                    label = f"path {name}={value if len(value) < 40 else value[:20] + '…'}"
                    self.run(
                        Probe(
                            label,
                            target.method,
                            path,
                            auth,
                            "valid",
                            body=body,
                            content_type=content_type,
                        )
                    )
            after = Probe(
                f"after the path parameter {name}", target.method, target.pattern, "-", "-"
            )
            self.check_block("the path parameters", after)

    def _path_suffixes(self, target: Target) -> None:
        body, content_type = self._form(target.method)
        first = next(self._paths(target))[0]
        for suffix in PATH_SUFFIXES:
            for auth in (SIGNED_OUT, SIGNED_IN):
                self.run(
                    Probe(
                        f"path +{suffix}",
                        target.method,
                        first + suffix,
                        auth,
                        "valid",
                        body=body,
                        content_type=content_type,
                    )
                )

    def _other_methods(self, target: Target) -> None:
        path = next(self._paths(target))[0]
        limit = int(self.app.config["MAX_CONTENT_LENGTH"])
        nested = b"[" * (limit - 1)
        nul = next(v for v in VALUE_CLASSES if v.name == "nul")
        for method in PROBED_METHODS:
            if method in target.allowed:
                continue
            for auth in (SIGNED_OUT, SIGNED_IN):
                self.run(Probe("no hostile value", method, path, auth, "valid"))
                query = "&".join(nul.query(name) for name in FIELDS)
                self.run(Probe("every field=nul", method, path, auth, "valid", query=query))
                if method == "PUT":  # the routing refuses the others before any body
                    self.run(
                        Probe(
                            "body json-nested",
                            method,
                            path,
                            auth,
                            "valid",
                            body=nested,
                            content_type="application/json",
                        )
                    )
        self.check_block("the other methods", Probe("after them", OTHER, path, "-", "-"))


def _wsgi_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def _no_fsync(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    if "sqlite" in type(dbapi_connection).__module__:
        cursor.execute("PRAGMA synchronous = OFF")
    else:
        cursor.execute("SET synchronous_commit TO off")
    cursor.close()
    if "sqlite" not in type(dbapi_connection).__module__:
        dbapi_connection.commit()


def sys_exc_info(exc: BaseException) -> Any:
    return type(exc), exc, exc.__traceback__


def _describe(changes: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]]) -> str:
    parts = []
    for name, (before, after) in sorted(changes.items()):
        added = [r for r in after if r not in before]
        removed = [r for r in before if r not in after]
        detail = f"{name}: {len(before)} -> {len(after)} rows"
        if added:
            detail += f", new {_short(added[0])}"
        if removed:
            detail += f", gone {_short(removed[0])}"
        parts.append(detail)
    return "; ".join(parts)


def _short(row: Any) -> str:
    text = repr(row)
    return text if len(text) <= 160 else text[:150] + "…"


# -- fixtures -------------------------------------------------------------------------------


def _device_endpoint(idp: FakeIdP) -> None:
    """Make the provider answer device authorization requests (RFC 8628 §3.2)."""
    idp.discovery["device_authorization_endpoint"] = idp.issuer + "/device_authorization"
    answer = {
        "device_code": "hostile-device-code-" + "d" * 20,
        "user_code": "WDJB-MJHT",
        "verification_uri": idp.issuer + "/device",
        "expires_in": 600,
        "interval": 5,
    }
    idp.routes["/device_authorization"] = lambda _request: (200, {}, answer)


@pytest.fixture(scope="module")
def hostile_env(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """One app per database for the whole module, with every kind of provider: the demo
    credentials, e-mail (the development outbox), passkeys and an OpenID Connect provider
    (a FakeIdP on loopback) with back-channel logout and device sign-in, and a SAML provider
    (its IdP's metadata from a file: no response it posts can be good)."""
    idp = FakeIdP()
    _device_endpoint(idp)
    thread = threading.Thread(
        target=idp.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    workdir = tmp_path_factory.mktemp("hostile")
    outbox = workdir / "outbox"
    outbox.mkdir()
    toml = write_providers_toml(
        workdir / "auth.toml",
        [
            # Declared: the development outbox is automatic only with no provider declared.
            {"id": "email", "type": "email", "name": "Email"},
            idp.provider_config("fake", backchannel_logout=True, device_flow=True),
            {
                "id": "saml",
                "type": "saml",
                "idp_metadata_file": str(idp_metadata_file(workdir, "https://idp.invalid/sso")),
            },
        ],
    )
    config = base_config(
        database_url,
        AUTH_CONFIG=str(toml),
        AUTH_PASSKEYS="true",
        EMAIL_OUTBOX=str(outbox),
        **NO_THROTTLES,
    )
    app = create_app(config, environ={})
    with app.app_context():
        empty_tables()
    env = Hostile(app, outbox, database_url)
    try:
        yield env
    finally:
        env.close()
        with app.app_context():
            empty_tables()
            db.engine.dispose()
        idp.server.shutdown()
        idp.server.server_close()


@pytest.fixture
def hostile(
    hostile_env: Hostile,
    user_factory: Callable[..., int],
    account_factory: Callable[..., int],
    session_factory: Callable[..., NewSession],
) -> Hostile:
    hostile_env.ensure_world(user_factory, account_factory, session_factory)
    return hostile_env


# -- the tests ------------------------------------------------------------------------------


def _assert_none(hostile: Hostile, target: Target, kind: str, title: str) -> None:
    failed = []
    for outcome in hostile.sweep(target):
        problems = outcome.problems
        if kind in problems:
            failed.append(f"  {outcome.probe.line()} -> {outcome.status}: {problems[kind]}")
    if failed:
        shown = failed[:MAX_LINES]
        if len(failed) > MAX_LINES:
            shown.append(f"  … and {len(failed) - MAX_LINES} more")
        pytest.fail(f"{target}: {len(failed)} {title}:\n" + "\n".join(shown), pytrace=False)


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_no_server_error(hostile: Hostile, target: Target) -> None:
    _assert_none(hostile, target, "server_error", "hostile request(s) answered 5xx")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_no_bare_page(hostile: Hostile, target: Target) -> None:
    _assert_none(hostile, target, "bare_page", "answer(s) neither the app's page nor JSON")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_no_secret_or_traceback(hostile: Hostile, target: Target) -> None:
    _assert_none(hostile, target, "leak", "answer(s) showing a secret or a traceback")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_no_write(hostile: Hostile, target: Target) -> None:
    _assert_none(hostile, target, "write", "hostile request(s) that changed stored data")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_no_warning(hostile: Hostile, target: Target) -> None:
    """A warning out of the app (an oversized cookie, say) is an error in this project's
    test runs, not a 5xx in production: its own class of failure."""
    _assert_none(hostile, target, "warning", "hostile request(s) that made the app warn")


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_input_is_not_printed_as_text(hostile: Hostile, target: Target) -> None:
    """A page may keep what was typed in a form field, but it must not print a request's
    arbitrary text as its own words (an error "code" that is any text at all)."""
    _assert_none(hostile, target, "printed", "page(s) printing the request's text")


def test_the_suite_reaches_the_code(hostile: Hostile) -> None:
    """The discovery and the signed-in, CSRF-valid state work: otherwise every request
    above would stop at the door and the suite would pass without testing anything."""
    assert {"email", "password", "callbackUrl", "next", "confirm", "logout_token"} <= set(FIELDS)
    assert {"auth.session-token", "auth.second-factor", "auth.passkey-challenge"} <= set(
        hostile.cookie_names
    )
    assert {"demo", "email", "passkey", "fake", "saml"} <= set(hostile.provider_ids)
    saml_cookies = [n for n in hostile.cookie_names if n.startswith("auth.saml-request.saml.")]
    assert len(saml_cookies) == 2, saml_cookies  # the genuine one, and one of the prefix's
    patterns = {t.pattern for t in TARGETS}
    assert {"/auth/signin/<provider_id>", "/account/api/sessions/<id:session_id>/end"} <= patterns
    assert "/auth/saml/<provider_id>/metadata" in patterns
    assert all(t.endpoint != "static" for t in TARGETS)
    signed_in = hostile.send(Probe("check", "GET", "/account", SIGNED_IN, "valid"))
    assert signed_in.status == 200
    # The app tells which fields it reads, from where (the per-field rounds rest on it).
    read = hostile.send(Probe("check", "GET", "/auth/signin", SIGNED_OUT, "valid", query="x=1"))
    assert "query:email" in read.reads, read.reads
    api = hostile.send(
        Probe(
            "check",
            "POST",
            "/account/api/delete",
            SIGNED_IN,
            "valid",
            body=b'{"x": 1}',
            content_type="application/json",
        )
    )
    assert "json:confirm" in api.reads, api.reads
    # A POST with the token passes the CSRF check and reaches the view (a refusal, here).
    passed = hostile.send(Probe("check", "POST", "/account/two-factor/off", SIGNED_IN, "valid"))
    assert passed.status == 303 and hostile.csrf_passed, passed.status
    refused = hostile.send(Probe("check", "POST", "/account/two-factor/off", SIGNED_IN, "none"))
    assert refused.status == 302 and not hostile.csrf_passed


def test_the_audit_trail_holds_refusals_only(hostile: Hostile) -> None:
    """What the hostile requests added to the audit trail (every sweep first, if this runs
    alone): refusals, and the sign-out the suite allows; no secret; the request's text only
    in the columns that keep it by design."""
    for target in TARGETS:
        hostile.sweep(target)
    query = sa.text("SELECT * FROM auth_events WHERE id > :start")
    with hostile.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query, {"start": hostile.audit_start})]
    assert rows, "no refusal was recorded: the sweeps did not reach the flows"
    unexpected = [r for r in rows if r["outcome"] != "failure" and r["type"] != "signout"]
    assert unexpected == [], unexpected[:5]
    leaked = [r for r in rows if hostile.leaks.find(repr(r).encode())]
    assert leaked == [], leaked[:5]
    echoed = [
        r
        for r in rows
        if MARKER in repr({k: v for k, v in r.items() if k not in ("device", "request_id")})
    ]
    assert echoed == [], echoed[:5]
