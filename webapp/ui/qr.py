"""QR codes drawn here (segno), never fetched: inline SVG for pages, so they work under the
strict CSP and with JavaScript off, and text for a terminal (``flask auth device-login``).

segno is imported at the first QR code drawn, not with the app: about 1 MB of each server
worker's memory, and most never draw one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from markupsafe import Markup

if TYPE_CHECKING:
    import segno


def _qr(data: str) -> segno.QRCode:
    import segno  # at the first QR code

    # Level M: still scans with some of it smudged or glared, at a modest size.
    return segno.make(data, error="m")


def qr_svg(data: str, *, label: str) -> Markup:
    """Return ``data`` as an inline ``<svg role="img">`` named ``label`` (its ``<title>``).

    Dark modules on white whatever the colour scheme: scanners need the contrast.
    """
    svg = _qr(data).svg_inline(
        scale=4, border=3, title=label, dark="#000", light="#fff", svgclass="qr"
    )
    # segno escapes the title; the rest is its own markup (numbers and fixed attributes).
    return Markup(svg.replace("<svg ", '<svg role="img" ', 1))


def print_qr(data: str) -> None:
    """Draw ``data`` as a QR code on the terminal (standard output)."""
    _qr(data).terminal(out=sys.stdout, compact=True)
