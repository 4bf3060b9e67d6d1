"""The front end's server side: built assets, the security headers and row URLs."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask

from webapp.settings import Settings
from webapp.ui import assets, csp, row_urls


def init_app(app: Flask, conf: Settings, *, ours: Callable[[], bool] | None = None) -> None:
    """Load the asset manifest, add the asset and row URL helpers and the security headers
    (to the answers ``ours`` says are ours, where the app has pages of its own)."""
    assets.init_app(app, conf)
    row_urls.init_app(app)
    csp.init_app(app, conf, ours=ours)
