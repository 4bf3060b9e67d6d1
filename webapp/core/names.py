"""Names people type and the pages show: a passkey's, a person's display name.

One rule for all of them: trimmed, in Unicode's composed form (NFC), and printable
throughout. ``str.isprintable`` refuses control characters (a line break, NUL), invisible
format characters (direction overrides, zero-width ones) and every space but the plain one;
the replacement character (U+FFFD) is refused too, as what text that was not valid UTF-8
becomes on its way in: a name is stored as the person wrote it, or not at all.
"""

from __future__ import annotations

import unicodedata

#: What a decoder puts in place of bytes that were not text.
_REPLACEMENT = "\ufffd"


def clean_name(raw: str, *, longest: int) -> str | None:
    """Return ``raw`` as the person meant it (trimmed, NFC); None when it is empty, longer
    than ``longest`` characters or holds a character that is not printable."""
    name = unicodedata.normalize("NFC", raw.strip())
    if not name or len(name) > longest or not name.isprintable() or _REPLACEMENT in name:
        return None
    return name
