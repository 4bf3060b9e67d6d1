"""QR codes drawn on the server as inline SVG (segno): the page loads no image from
anywhere and runs no script, so it works under the strict CSP and with JavaScript off."""

from __future__ import annotations

import segno
from markupsafe import Markup


def qr_svg(data: str, *, label: str) -> Markup:
    """Return ``data`` as an inline ``<svg role="img">`` named ``label`` (its ``<title>``).

    Dark modules on white whatever the colour scheme: scanners need the contrast.
    """
    svg = segno.make(data, error="m").svg_inline(
        scale=4, border=3, title=label, dark="#000", light="#fff", svgclass="qr"
    )
    # segno escapes the title; the rest is its own markup (numbers and fixed attributes).
    return Markup(svg.replace("<svg ", '<svg role="img" ', 1))
