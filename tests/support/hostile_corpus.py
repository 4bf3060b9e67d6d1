"""The fixed corpus of tests/test_hostile_input.py (issue 14), and what it is aimed at.

Values: every string a field, a cookie, a header, a body or a path segment gets there, each
with a class name that a failure report names. Discovery: the form, query and JSON field
names the app's code reads, the request headers it reads and the cookie names it declares,
all found by reading webapp/ (so a new field, header or cookie is covered without editing
the test). Checks: what an answer must not be (a Werkzeug default page or unreadable JSON,
a traceback, arbitrary text printed on a page).

Every string value carries ``MARKER``, so that a page printing it back can be told from one
printing something of its own; none of them is a usable value (no value is a well-formed
e-mail address, a right password or code, or "DELETE"), so no request of the suite may
legitimately sign anyone in, send a message or change a row.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
WEBAPP = ROOT / "webapp"

#: Starts every hostile string: a page showing it as text shows the request's input.
MARKER = "Zq7hostile"

#: Fields sent to every route whether or not webapp/ reads them (issue 14's list).
STANDARD_FIELDS = (
    "email",
    "password",
    "csrfToken",
    "callbackUrl",
    "token",
    "code",
    "name",
    "json",
    "error",
    "provider",
    "action",
    "state",
    "logout_token",
    "user_code",
    "id",
)


# -- field values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueClass:
    """One class of hostile field value, as it goes into a query string and into a form body.

    ``pairs`` is the list of (key suffix, value) the field becomes: one pair, two (a
    duplicated field) or a key with ``[]`` (an array-shaped one). ``raw_query`` and
    ``raw_body`` replace the percent-encoding of the value where the class is about bytes
    that no text encodes (invalid UTF-8, a lone surrogate). ``in_body`` False: too large for
    a body (it would only meet the size limit; the oversized bodies are their own cases).
    """

    name: str
    pairs: tuple[tuple[str, str], ...] = ()
    raw_query: str | None = None
    raw_body: bytes | None = None
    in_body: bool = True

    def query(self, field: str) -> str:
        if self.raw_query is not None:
            return f"{quote(field)}={self.raw_query}"
        return "&".join(f"{quote(field + k)}={v}" for k, v in self.encoded)

    @functools.cached_property
    def encoded(self) -> tuple[tuple[str, str], ...]:
        # Percent-encoded once: a megabyte costs more to encode than to send.
        return tuple((k, quote(v, safe="")) for k, v in self.pairs)

    def body(self, field: str) -> bytes:
        if self.raw_body is not None:
            return quote(field).encode() + b"=" + self.raw_body
        return self.query(field).encode()


def _one(name: str, value: str, **kw: Any) -> ValueClass:
    return ValueClass(name, pairs=(("", value),), **kw)


#: The field values (issue 14): over-long, NUL, CR/LF, bidi controls, invalid UTF-8 and a
#: lone surrogate (percent-encoded in the query, raw bytes in the body), duplicated and
#: array-shaped fields. Address-shaped where that gets a value further into an e-mail check.
VALUE_CLASSES: tuple[ValueClass, ...] = (
    _one("over-long-20k", MARKER + "x" * 20_000),
    _one("over-long-1MB", MARKER + "x" * (1 << 20), in_body=False),
    _one("nul", MARKER + "-ann@example.com\x00.evil.example"),
    _one("cr-lf", MARKER + "-ann@example.com\r\nBcc: evil@example.com"),
    _one("bidi", "\u202e" + MARKER + "-moc.elpmaxe@nna\u202c\u2066\u200f"),
    ValueClass(
        "invalid-utf8",
        raw_query="%FF%FE%C0%AF" + MARKER,
        raw_body=b"\xff\xfe\xc0\xaf" + MARKER.encode(),
    ),
    ValueClass(
        "lone-surrogate",
        raw_query="%ED%A0%80" + MARKER + "%ED%B0%80",
        raw_body=b"\xed\xa0\x80" + MARKER.encode() + b"\xed\xb0\x80",
    ),
    ValueClass("duplicated", pairs=(("", MARKER + "-a"), ("", MARKER + "-b"))),
    ValueClass("array-shaped", pairs=(("[]", MARKER + "-a"), ("[]", MARKER + "-b"))),
)

#: JSON values of the wrong kind or shape, each sent for every field at once (then for
#: one field at a time when that fails): text with controls, a lone surrogate escape, and
#: lists, numbers, null, objects and booleans where a string is expected.
JSON_VALUE_CLASSES: dict[str, Any] = {
    "json-nul": MARKER + "\x00",
    "json-cr-lf": MARKER + "\r\nX-Injected: 1",
    "json-bidi": "\u202e" + MARKER,
    "json-lone-surrogate": "\ud800" + MARKER,
    "json-list": [MARKER],
    "json-huge-int": 99999999999999999999999,
    "json-float": 1e308,
    "json-null": None,
    "json-object": {"$ne": MARKER},
    "json-bool": True,
}
_deep: Any = MARKER
for _ in range(100):
    _deep = [_deep]
JSON_VALUE_CLASSES["json-nested-100"] = _deep
del _deep


#: Whole request bodies: deep nesting (the 100,000 levels issue 14 names are larger than
#: the app's MAX_CONTENT_LENGTH, so the same nesting is also sent at the largest depth under
#: it, which is what reaches a parser), top-level JSON of the wrong type, bytes that are not
#: UTF-8, and bodies that lie about their type. (name, content type, body)
def body_cases(max_content_length: int) -> list[tuple[str, str, bytes]]:
    fits_list = max_content_length - 1
    fits_object = (max_content_length - 1) // len('{"a":')
    many = "&".join(f"f{i}=1" for i in range(5000))
    boundary = "hostileboundary"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="email"\r\n\r\n{MARKER}\x00'
        f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="../'
        f'../x"\r\nContent-Type: text/plain\r\n\r\n{MARKER}\r\n--{boundary}--\r\n'
    )
    json_type = "application/json"
    mark = MARKER.encode()
    form_type = "application/x-www-form-urlencoded"
    return [
        ("json-nested-100k-lists", json_type, b"[" * 100_000),
        ("json-nested-100k-objects", json_type, b'{"a":' * 100_000),
        (f"json-nested-{fits_list}-lists", json_type, b"[" * fits_list),
        (f"json-nested-{fits_object}-objects", json_type, b'{"a":' * fits_object),
        ("json-top-list", json_type, b'["' + MARKER.encode() + b'"]'),
        ("json-top-number", json_type, b"99999999999999999999999"),
        ("json-top-inf", json_type, b"1e9999"),
        ("json-top-null", json_type, b"null"),
        ("json-top-string", json_type, b'"' + MARKER.encode() + b'"'),
        ("json-empty", json_type, b""),
        ("json-truncated", json_type, b'{"email": "' + MARKER.encode()),
        ("json-invalid-utf8", json_type, b'{"email": "\xff\xfe' + MARKER.encode() + b'"}'),
        ("json-raw-surrogate", json_type, b'{"email": "\xed\xa0\x80' + MARKER.encode() + b'"}'),
        ("json-duplicate-keys", json_type, b'{"confirm": "x", "confirm": ["%s"]}' % mark),
        ("json-form-body", json_type, f"email={MARKER}".encode()),
        ("form-json-body", form_type, b'{"email": "' + MARKER.encode() + b'"}'),
        ("form-5000-fields", form_type, many.encode()),
        ("multipart", f"multipart/form-data; boundary={boundary}", multipart.encode()),
        ("multipart-garbage", f"multipart/form-data; boundary={boundary}", b"--" + _noise(64)),
        ("over-limit-form", form_type, b"email=" + b"x" * max_content_length),
        ("over-limit-json", json_type, b'{"email": "' + b"x" * max_content_length + b'"}'),
    ]


# -- cookie values --------------------------------------------------------------------------


def _noise(size: int) -> bytes:
    """Bytes that look random, the same in every run."""
    return hashlib.shake_256(MARKER.encode()).digest(size)


def _looks_sealed(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


#: Bad values for every cookie (``moved`` — a genuine cookie of another name — is added by
#: the test, which has genuine ones). Each is sent for every cookie at once, then for one
#: cookie at a time when that fails.
COOKIE_CLASSES: dict[str, str] = {
    "garbage": MARKER + "!!not-a-cookie!!",
    "over-long": MARKER + "A" * 20_000,
    "nul": MARKER + "\x00abc",
    "cr-lf": MARKER + "\r\nSet-Cookie: x=1",
    # Latin-1 in the WSGI environ stands for the bytes themselves: FF FE is not UTF-8.
    "invalid-utf8": MARKER + "\xff\xfe\xc0\xaf",
    "not-base64": MARKER + "***%%%$$$",
    # The shape of a sealed value (nonce, ciphertext, tag; base64url) under a key nobody has.
    "forged-sealed": _looks_sealed(_noise(12 + 40 + 16)),
    # An itsdangerous-shaped value (payload.signature) with a signature nobody made.
    "forged-signed": "eyJiIjoiWnE3aG9zdGlsZSIsImkiOlsieCJdfQ." + "A" * 27,
    # A session token of the right shape that names no session.
    "unknown-token": _looks_sealed(_noise(32)),
}


# -- header values --------------------------------------------------------------------------


def _wsgi(text: str) -> str:
    # A WSGI environ holds a header's bytes as Latin-1 characters.
    return text.encode().decode("latin-1")


#: Bad values for every request header the app reads (a URL parser's error, NUL, a line
#: break, over-long, bytes that are not UTF-8, a bidi control).
HEADER_CLASSES: dict[str, str] = {
    "broken-url": "http://[" + MARKER,
    "nul": MARKER + "\x00x",
    "cr-lf": MARKER + "\r\nX-Injected: 1",
    "over-long": MARKER + "x" * 20_000,
    "invalid-utf8": MARKER + "\xff\xfe\xc0\xaf",
    "bidi": _wsgi("\u202e" + MARKER),
}

#: Headers that decide before anything else whether a request goes on (the host check,
#: the CSRF check): each goes alone, or it would hide what the others do.
GATE_HEADERS = ("Host", "Origin", "Referer", "X-CSRFToken", "X-CSRF-Token")
#: Read through Werkzeug's properties rather than by name (request.referrer, …).
STANDARD_HEADERS = ("Accept", "Authorization", "Origin", "Referer", "User-Agent")


# -- path parameter values ------------------------------------------------------------------

#: For ``<id:…>`` row ids (issue 14): huge, negative, zero, float-like, leading zeros
#: (``00001`` and the seeded victim's id padded are added by the test), and segments with NUL,
#: a line break, a parent step and non-ASCII digits.
ID_VALUES = (
    "99999999999999999999999",
    "9223372036854775808",
    "9223372036854775807",
    "-1",
    "0",
    "1e9999",
    "1.0",
    "00001",
    "0x1",
    "%00",
    "1%00",
    "%0a",
    "1%0d%0aX:%20y",
    "..",
    "..%2f..",
    "%2e%2e",
    "%ED%A0%80",
    "%FF",
    "%EF%BC%91",  # full-width digit one
    "%D9%A1",  # Arabic-Indic digit one
    "%20" + "1",
)

#: For other path parameters (a provider id).
TEXT_VALUES = (
    "%00",
    "demo%00",
    "%0a",
    "demo%0d%0aX-Injected:%201",
    "..",
    "..%2f..%2fetc",
    "%2e%2e",
    "%ED%A0%80",
    "%FF%FE",
    "%E2%80%AEomed",  # bidi override
    "%C3%A9",
    "%EF%BC%A4emo",  # full-width D
    "DEMO",
    "99999999999999999999999",
    "-1",
    "1e9999",
    MARKER + "x" * 20_000,
)

#: Appended to a route's path: no route has them, so each is a 404 (or the route itself).
PATH_SUFFIXES = ("/%00", "%0a", "/../../etc/passwd", "/..%2f..%2f", "/%ED%A0%80", "/%C3%A9/x")


# -- discovery ------------------------------------------------------------------------------

#: Names under which the app's code holds a request's fields (``form.get("email")``).
_FIELD_HOLDERS = frozenset({"form", "args", "query", "values", "params"})
_REQUEST_PARTS = frozenset({"form", "args", "values", "json", "files"})


def _python_files() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(WEBAPP.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _holds_fields(node: ast.AST, json_names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in _FIELD_HOLDERS or node.id in json_names
    return (
        isinstance(node, ast.Attribute)
        and node.attr in _REQUEST_PARTS
        and isinstance(node.value, ast.Name)
        and node.value.id == "request"
    )


def discovered_fields() -> frozenset[str]:
    """Every literal field name webapp/ reads from a request's query, form or JSON body:
    ``request.form.get("x")``, ``form["x"]``, ``args.get("x")`` (the provider and flow
    signatures name their mappings form, args, query, values or params), and ``.get("x")``
    on a variable assigned from ``request.get_json(…)``."""
    found: set[str] = set()
    for _path, tree in _python_files():
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                continue
            json_names = {
                target.id
                for node in ast.walk(func)
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.BoolOp | ast.Call)
                and "request.get_json" in ast.unparse(node.value)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(func):
                key: ast.AST | None = None
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "getlist", "pop")
                    and node.args
                    and _holds_fields(node.func.value, json_names)
                ):
                    key = node.args[0]
                elif (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Load)
                    and _holds_fields(node.value, json_names)
                ):
                    key = node.slice
                elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
                    # ``"code" in form``
                    if any(isinstance(op, ast.In) for op in node.ops) and any(
                        _holds_fields(c, json_names) for c in node.comparators
                    ):
                        key = node.left
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.add(key.value)
    return frozenset(found)


def all_fields() -> tuple[str, ...]:
    return STANDARD_FIELDS + tuple(sorted(discovered_fields() - set(STANDARD_FIELDS)))


def discovered_headers() -> tuple[str, ...]:
    """Request headers webapp/ reads: ``request.headers.get("X")``, ``headers["X"]`` and the
    WSGI keys it names (``"HTTP_X_FORWARDED_FOR"``), with ``STANDARD_HEADERS``."""
    found = set(STANDARD_HEADERS)
    for _path, tree in _python_files():
        for node in ast.walk(tree):
            key: ast.AST | None = None
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and ast.unparse(node.func.value).endswith("request.headers")
            ):
                key = node.args[0]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"HTTP_[A-Z0-9_]+", node.value):
                    found.add(node.value[5:].replace("_", "-").title())
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
    return tuple(sorted(found))


_COOKIE_CONSTANT = re.compile(r"(?:^|_)COOKIE$")


def declared_cookies() -> dict[str, str]:
    """Module-level ``…COOKIE = "auth.…"`` constants of webapp/: name -> where declared.

    A constant that is a prefix (``auth.device``, which takes ``.<provider id>``) is
    returned as it is; the test adds the provider ids."""
    found: dict[str, str] = {}
    for path, tree in _python_files():
        assert isinstance(tree, ast.Module)
        for node in tree.body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
                continue
            for target in node.targets:
                if (
                    isinstance(target, ast.Name)
                    and _COOKIE_CONSTANT.search(target.id)
                    and isinstance(node.value.value, str)
                    and node.value.value.startswith("auth.")
                ):
                    found[node.value.value] = f"{path.relative_to(ROOT)}:{target.id}"
    return found


# -- what an answer must not be -------------------------------------------------------------

#: Werkzeug's default error page (HTTPException.get_body): no layout, no way on.
_BARE_PAGE = re.compile(rb"^<!doctype html>\s*<html lang=en>\s*<title>\d{3} ", re.IGNORECASE)
#: Every page of the app is built on templates/base.html.
_LAYOUT = b'class="site-header"'

TRACEBACK_MARKERS = (
    b"Traceback (most recent call last)",
    b'.py", line ',
    b"sqlalchemy.exc",
    b"(Background on this error at",
    b"psycopg.errors",
    b"sqlite3.",
    b"werkzeug.debug",
)


def unreadable(status: int, content_type: str, body: bytes, method: str) -> str | None:
    """Why this answer is not a page or JSON a person or script can act on (None if it is)."""
    if method == "HEAD" or 300 <= status < 400 or status in (204, 304):
        return None
    if _BARE_PAGE.match(body):
        return "Werkzeug's default page"
    if not body:
        return None if status < 400 else "empty error answer"
    if content_type.startswith("application/json"):
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            return "JSON that does not parse"
        return None
    if content_type.startswith("text/html") and status >= 400 and _LAYOUT not in body:
        return "an HTML error without the app's layout"
    return None


class _VisibleText(HTMLParser):
    """The text a browser shows: element text outside script, style and template."""

    HIDDEN = frozenset({"script", "style", "template", "textarea"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.HIDDEN:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.text.append(data)


def printed_input(status: int, content_type: str, body: bytes) -> str | None:
    """The hostile input an HTML page shows as text (not inside a form field), if any.

    A redirect's body (Werkzeug's "Redirecting..." with the target as a link) is not a
    page: browsers go on at once."""
    if 300 <= status < 400 or not content_type.startswith("text/html"):
        return None
    if MARKER.encode() not in body:
        return None
    parser = _VisibleText()
    parser.feed(body.decode("utf-8", "replace"))
    text = "".join(parser.text)
    at = text.find(MARKER)
    if at < 0:
        return None
    return text[max(0, at - 40) : at + 60]
