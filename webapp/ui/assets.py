"""Built front-end assets: the esbuild manifest, ``asset_url`` and ``static_url`` for
templates, brand.css; and where an app finds our templates and static files.

An app whose own folders are ours (the standalone app) serves them as its own: ``/static``.
Any other app (an application that adds the facility) keeps its own, searched first, so
that its ``templates/auth/signin.html`` replaces ours; ours come after them, through the
blueprint ``auth_ui``, whose static files are served under AUTH_URL's path
(``/auth/static/…``).

``ui-src/build.mjs`` writes content-hashed bundles and ``manifest.json`` into
``webapp/static/dist``; the manifest is read once at start-up. Hashed files never change,
so they are cached for a year; a new build has new names.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, request, url_for

from webapp.settings import Settings, current_settings

PACKAGE_DIR = Path(__file__).resolve().parent.parent
STATIC_DIR = PACKAGE_DIR / "static"
TEMPLATES_DIR = PACKAGE_DIR / "templates"
DIST_DIR = STATIC_DIR / "dist"
MANIFEST = DIST_DIR / "manifest.json"
IMMUTABLE = "public, max-age=31536000, immutable"
#: Where the app keeps the endpoint that serves our static files (``app.extensions``).
STATIC_ENDPOINT_KEY = "webapp.static_endpoint"

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
        return static_url(f"dist/{manifest[name]}")
    except KeyError:
        raise AssetError(f"no asset {name!r} in the manifest: run `npm run build:assets`") from None


def static_url(filename: str) -> str:
    """Return the URL of our static file ``filename`` (e.g. ``css/app.css``)."""
    return url_for(current_app.extensions[STATIC_ENDPOINT_KEY], filename=filename)


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


def init_app(app: Flask, conf: Settings) -> None:
    app.extensions["webapp.assets"] = load_manifest()
    app.register_blueprint(bp, url_prefix="/assets")
    app.add_template_global(asset_url)
    app.add_template_global(static_url)
    app.add_template_global(brand_css_url)
    own_static = _folder(app.root_path, app.static_folder) == STATIC_DIR
    own_templates = _folder(app.root_path, app.template_folder) == TEMPLATES_DIR
    served_by: Flask | Blueprint = app
    endpoint = "static"
    if not (own_static and own_templates):
        ui = Blueprint(
            "auth_ui",
            __name__,
            static_folder=None if own_static else STATIC_DIR,
            # Under the auth routes' path; at the root they would take the app's /static.
            static_url_path=f"{conf.base_path}/static" if conf.base_path else "/auth-static",
            template_folder=None if own_templates else TEMPLATES_DIR,
        )
        app.register_blueprint(ui)
        if not own_static:
            served_by, endpoint = ui, "auth_ui.static"
    app.extensions[STATIC_ENDPOINT_KEY] = endpoint
    app.view_functions[endpoint] = _serve_static(served_by.send_static_file)


def _folder(root: str, folder: str | os.PathLike[str] | None) -> Path | None:
    """``folder`` (relative to ``root``) as an absolute path, or None."""
    return None if folder is None else (Path(root) / folder).resolve()
