"""Built front-end assets: the esbuild manifest, ``asset_url`` for templates, brand.css.

``ui-src/build.mjs`` writes content-hashed bundles and ``manifest.json`` into
``webapp/static/dist``; the manifest is read once at start-up. Hashed files never change,
so they are cached for a year; a new build has new names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, request, url_for

from webapp.settings import current_settings

DIST_DIR = Path(__file__).resolve().parent.parent / "static" / "dist"
MANIFEST = DIST_DIR / "manifest.json"
IMMUTABLE = "public, max-age=31536000, immutable"

bp = Blueprint("assets", __name__)


class AssetError(RuntimeError):
    """The manifest is missing or does not name an asset; the message says how to fix it."""


def load_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """Return the manifest's logical name → file (relative to ``static/dist``) mapping."""
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise AssetError(f"{path} is missing: run `npm run build:assets`") from None
    if not isinstance(manifest, dict):
        raise AssetError(f"{path} must map asset names to files")
    return {str(k): str(v) for k, v in manifest.items()}


def asset_url(name: str) -> str:
    """Return the URL of the built asset ``name`` (e.g. ``chooser``), hashed file name."""
    manifest: dict[str, str] = current_app.extensions["webapp.assets"]
    try:
        return url_for("static", filename=f"dist/{manifest[name]}")
    except KeyError:
        raise AssetError(f"no asset {name!r} in the manifest: run `npm run build:assets`") from None


@bp.get("/brand.css")
def brand_css() -> Response:
    # The brand colour as a stylesheet, not an inline style attribute: style-src 'self'
    # refuses inline styles. Settings accept only a hex colour, so nothing can be injected.
    color = current_settings().brand.color
    response = Response(f":root {{ --brand: {color}; }}\n", mimetype="text/css")
    response.headers["Cache-Control"] = IMMUTABLE if request.args.get("v") else "no-cache"
    return response


def brand_css_url() -> str:
    """Return brand.css's URL, versioned by the colour so a new colour is a new URL."""
    color = current_settings().brand.color
    return url_for("assets.brand_css", v=hashlib.sha256(color.encode()).hexdigest()[:8])


def _serve_static(send_static_file: Callable[[str], Response]) -> Callable[[str], Response]:
    """Wrap the static view: hashed bundles are cached for a year, the rest revalidated.

    On the static view rather than after every request: only static files pay for it.
    """

    def static(filename: str) -> Response:
        response = send_static_file(filename)
        if filename.startswith("dist/") and filename != "dist/manifest.json":
            response.headers["Cache-Control"] = IMMUTABLE
        return response

    return static


def init_app(app: Flask) -> None:
    app.extensions["webapp.assets"] = load_manifest()
    app.register_blueprint(bp, url_prefix="/assets")
    app.add_template_global(asset_url)
    app.add_template_global(brand_css_url)
    app.view_functions["static"] = _serve_static(app.send_static_file)
