"""How the account pages show values that are not prose: e-mail addresses and names."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

#: Where a long address (or a name made from one) may wrap: before its "@", each dot and
#: each hyphen, as style guides break addresses and URLs, so the next line starts with the
#: punctuation and no line ends in a hyphen that reads as a word split in two.
_BREAKS = re.compile(r"(?=[@.\-])")


def breakable(text: str | None) -> Markup:
    """``text``, escaped, with a line-break opportunity (``<wbr>``) before each "@", "."
    and "-": a long address wraps between its parts, never in the middle of one.

    A browser may also break after a hyphen; a hyphen is kept with the character after it
    (``.nobr``, app.css) so that it cannot. The result must sit in an inline context (a
    ``<span>``, a paragraph), not directly in a flex or grid container, where each piece
    would become an item of its own.
    """
    if not text:
        return Markup("")
    pieces = []
    for part in _BREAKS.split(text):
        if part.startswith("-") and len(part) > 1:
            pieces.append(Markup('<span class="nobr">%s</span>%s') % (part[:2], part[2:]))
        elif part:
            pieces.append(escape(part))
    return Markup("<wbr>").join(pieces)
