"""The front end's server side: built assets and the security headers."""

from __future__ import annotations

from flask import Flask

from webapp.settings import Settings
from webapp.ui import assets, csp


def init_app(app: Flask, conf: Settings) -> None:
    """Load the asset manifest, add the asset helpers and the security headers."""
    assets.init_app(app)
    csp.init_app(app, conf)
