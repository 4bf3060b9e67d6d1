"""QR codes drawn here (segno), never fetched: inline SVG for pages, so they work under the
strict CSP and with JavaScript off, and text for a terminal (``flask auth device-login``)."""

from __future__ import annotations

import sys

import segno
from markupsafe import Markup


def _qr(data: str) -> segno.QRCode:
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
