"""What may be written to a log line: untrusted values encoded, secrets redacted."""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

#: Longest untrusted value a log line carries by default, in characters before encoding.
LIMIT = 1000

#: Query parameters whose values are secrets: the e-mail link's token, an OAuth callback's
#: code and state, and those of features to come (RP-initiated and back-channel logout,
#: the device flow). Matched case-insensitively and after percent-decoding the name, which
#: is wider than the app reads them (it reads ``token`` only): redacting one too many
#: costs nothing.
SECRET_PARAMS = frozenset(
    {"token", "code", "state", "id_token_hint", "logout_token", "device_code"}
)
REDACTED = "[redacted]"
#: Request headers that carry credentials (session cookies, bearer and basic credentials):
#: a log that copies headers (a proxy's or server's own access log) shows ``[redacted]``.
SECRET_HEADERS = frozenset({"cookie", "authorization", "proxy-authorization"})

_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(code_point: int) -> str:
    char = chr(code_point)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code_point:02x}" if code_point < 0x100 else f"\\u{code_point:04x}"


# Every character a log reader or str.splitlines() could take for a line break or a
# control: Unicode categories Cc (C0, DEL, C1, which hold \x0b \x0c \x1c-\x1e and \x85),
# Zl (U+2028) and Zp (U+2029); lone surrogates (Cs: a JSON body's "\\ud800" decodes to one,
# and no UTF-8 handler can write it, so the whole line would be lost); and the backslash,
# so that an escape in the output always means the encoder wrote it.
# tests/test_log_safety.py checks this set against unicodedata.
_TABLE = {
    c: _escape(c)
    for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0xD800, 0xE000), ord("\\"))
}
_SEPARATORS_TABLE = {0x2028: "\\u2028", 0x2029: "\\u2029"}

# Where a parameter's name or value ends: a separator, "&" or ";" (some servers and
# frameworks, not ours, split on it), or whitespace (the " HTTP/1.1" of a request line). A
# class of single characters: a split on it takes one step per character.
_ENDS = re.compile(r"[&;\s]")
# The same ends in ASCII text (nearly every request) as a byte table, ";" and what
# str.isspace() (the pattern's \s) takes for whitespace becoming "&", for bytes.translate
# and str.split, which take a tenth of the pattern's time.
_ASCII_ENDS = bytes(c for c in range(128) if chr(c) == ";" or chr(c).isspace())
_ASCII_ENDS_TO_AMPERSAND = bytes.maketrans(_ASCII_ENDS, b"&" * len(_ASCII_ENDS))


def encode(value: object, *, limit: int | None = LIMIT, quote: bool = False) -> str:
    """Return ``value`` as text that stays on one log line and reads unambiguously.

    Line breaks and controls become visible escapes (``\\n``, ``\\x85``, ``\\u2028``), a
    backslash becomes ``\\\\``; text longer than ``limit`` characters is cut there and ends
    with ``...[+N chars]``. With ``quote``, the result is wrapped in double quotes and
    inner quotes are escaped (for ``key="value"`` fields). Plain printable text without a
    backslash, the usual case, is returned as it is.
    """
    text = value if isinstance(value, str) else str(value)
    cut = ""
    if limit is not None and len(text) > limit:
        cut = f"...[+{len(text) - limit} chars]"
        text = text[:limit]
    # isprintable() is False for every character in _TABLE but the backslash.
    if not text.isprintable() or "\\" in text:
        text = text.translate(_TABLE)
    if quote:
        return '"' + text.replace('"', '\\"') + cut + '"'
    return text + cut


def escape_separators(text: str) -> str:
    """Escape U+2028 and U+2029, for text whose controls and backslashes are escaped already.

    werkzeug's development server escapes C0, C1 and the backslash in its request line but
    leaves these two, on which ``str.splitlines()`` breaks.
    """
    return text.translate(_SEPARATORS_TABLE) if not text.isascii() else text


def redact(text: str) -> str:
    """Return a URL, query string or request line with secret parameter values redacted.

    ``GET /auth/callback/email?token=abc&email=a%40b.c HTTP/1.1`` becomes ``GET
    /auth/callback/email?token=[redacted]&email=a%40b.c HTTP/1.1``. Names are kept as sent;
    every occurrence of a repeated parameter is redacted; text without a ``?`` (or, for
    :func:`redact_query`, any text) is returned as it is when nothing matches. Everything
    after the first ``?`` is read, so a request line with stray spaces in its target is
    still covered. Time linear in the text's length.
    """
    start = text.find("?")
    if start < 0 or "=" not in text:
        return text
    return text[: start + 1] + _redact_params(text[start + 1 :])


def redact_query(query: str) -> str:
    """Like :func:`redact`, for a query string without its ``?`` (``QUERY_STRING``)."""
    if "=" not in query:
        return query
    return _redact_params(query)


def _redact_params(query: str) -> str:
    """``query``, the text after a ``?``, with the values of secret parameters redacted.

    A parameter lies within one segment (``_segments``), and a segment holds at most one:
    its name starts at the segment's start when a separator (or the ``?``) precedes it,
    else (whitespace precedes it) just after the segment's first ``?``; the name ends at
    the first ``=`` after that, and the rest of the segment is the value. One pass: the
    regex this replaced looked for a name after every ``?`` of a run of them, each time to
    the run's end, in time quadratic in its length (issue 40).
    """
    shown: list[str] = []
    copied = 0  # query[:copied] is in shown
    end = -1
    for segment in _segments(query):
        start, end = end + 1, end + 1 + len(segment)
        if start and query[start - 1] not in "&;":
            name_start = segment.find("?") + 1
            if not name_start:
                continue
        else:
            name_start = 0
        equals = segment.find("=", name_start)
        if equals >= 0 and _is_secret(segment[name_start:equals]):
            shown += query[copied : start + equals + 1], REDACTED
            copied = end
    if not copied:
        return query
    shown.append(query[copied:])
    return "".join(shown)


def _segments(query: str) -> list[str]:
    """``query`` cut where a parameter's name or value ends, the separators left out."""
    if query.isascii():
        return query.encode().translate(_ASCII_ENDS_TO_AMPERSAND).decode().split("&")
    return _ENDS.split(query)


def _is_secret(name: str) -> bool:
    if "%" in name or "+" in name:
        name = unquote_plus(name)
    return name.strip().lower() in SECRET_PARAMS
