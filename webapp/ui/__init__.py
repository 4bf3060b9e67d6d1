"""The front end's server side: built assets, the security headers, and page view models."""

from __future__ import annotations

from flask import Flask

from webapp.ui import assets, chooser, csp, errorpage


def init_app(app: Flask) -> None:
    """Load the asset manifest, add the template helpers and the security headers."""
    assets.init_app(app)
    csp.init_app(app)
    app.add_template_global(chooser.chooser_data)
    app.add_template_global(errorpage.error_view)
