"""The front end's server side: built assets and manifest, the CSP, the islands' data.

Also runs the islands' own unit tests (node) and proves the committed bundle is what the
sources build to, so CI fails when someone edits ``ui-src/`` without rebuilding.
"""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from webapp.ui.assets import DIST_DIR, MANIFEST
from webapp.ui.csp import POLICY

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "/",
    "/auth/signin",
    "/auth/signin?error=OAuthSignin",
    "/auth/signout",
    "/auth/verify-request",
    "/auth/error?error=Verification",
    "/account",
]


def _node() -> str:
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "esbuild").exists():
        pytest.fail("node and the npm packages are needed: run scripts/setup", pytrace=False)
    return node


def test_committed_bundle_matches_the_sources(tmp_path):
    subprocess.run([_node(), "ui-src/build.mjs", str(tmp_path)], cwd=ROOT, check=True)
    compared = filecmp.dircmp(DIST_DIR, tmp_path)
    stale = _differences(compared)
    assert not stale, f"webapp/static/dist is stale, run `npm run build:assets`: {stale}"


def _differences(compared: filecmp.dircmp) -> list[str]:
    found = compared.left_only + compared.right_only + compared.funny_files
    # dircmp compares shallowly (size, mtime); compare the bytes.
    found += [
        name
        for name in compared.common_files
        if not filecmp.cmp(Path(compared.left) / name, Path(compared.right) / name, shallow=False)
    ]
    for sub in compared.subdirs.values():
        found += _differences(sub)
    return found


def test_island_unit_tests_pass():
    run = subprocess.run([_node(), "ui-src/test/run.mjs"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert re.search(r"ℹ pass [1-9]", run.stdout), run.stdout[-2000:]


def test_manifest_names_existing_hashed_files():
    manifest = json.loads(MANIFEST.read_text())
    assert set(manifest) == {"chooser", "error-page", "htmx", "page-tools", "passkey"}
    for name, file in manifest.items():
        assert re.fullmatch(rf"{name}-[A-Z0-9]{{8}}\.js", file)
        assert (DIST_DIR / file).is_file()


def test_pages_load_built_assets_from_the_app_with_long_caching(client, auth):
    auth.signin()
    for path in PAGES:
        html = client.get(path).get_data(as_text=True)
        for src in re.findall(r'<script[^>]* src="([^"]+)"', html):
            assert src.startswith("/static/dist/"), (path, src)
            with client.get(src) as r:
                assert r.status_code == 200
                assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    # The manifest is not content-hashed: it must be revalidated.
    with client.get("/static/dist/manifest.json") as r:
        assert r.status_code == 200 and "immutable" not in r.headers.get("Cache-Control", "")


def test_every_page_carries_the_policy_and_nothing_inline_needs_unsafe_inline(client, auth):
    auth.signin()
    for path in PAGES:
        r = client.get(path)
        assert r.headers["Content-Security-Policy"] == POLICY, path
        html = r.get_data(as_text=True)
        # Scripts: only external files, and JSON data blocks (never executed).
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert ' src="' in tag or 'type="application/json"' in tag, (path, tag)
        assert " style=" not in html, path
        assert "<style" not in html, path
        assert not re.search(r"<[^>]+\son[a-z]+=", html), path  # no event handler attributes


def test_policy_allows_no_inline_scripts_or_styles():
    directives = dict(d.split(" ", 1) for d in POLICY.split("; "))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert "unsafe" not in POLICY


def test_brand_colour_is_a_stylesheet(make_app):
    client = make_app(AUTH_BRAND_COLOR="#aa3300").test_client()
    html = client.get("/").get_data(as_text=True)
    (href,) = re.findall(r'href="(/assets/brand\.css\?v=[0-9a-f]+)"', html)
    r = client.get(href)
    assert r.mimetype == "text/css"
    assert r.get_data(as_text=True) == ":root { --brand: #aa3300; }\n"


def test_chooser_data_block(client):
    html = client.get(
        "/auth/signin?error=EmailSignin&callbackUrl=/account&email=ann@example.com"
    ).get_data(as_text=True)
    (block,) = re.findall(
        r'<script type="application/json" id="chooser-data">(.*?)</script>', html, re.S
    )
    data = json.loads(block)
    assert data["authBase"] == "/auth"
    assert data["order"] == list(client.application.extensions["webapp.providers"])
    assert data["callbackUrl"] == "/account"
    assert data["email"] == "ann@example.com"
    assert data["error"]["code"] == "EmailSignin"
    assert data["credentials"]["demo"]["demo"] is True
    assert [f["name"] for f in data["credentials"]["demo"]["fields"]] == ["email", "password"]


def _page_data(client, path: str, block_id: str) -> dict:
    html = client.get(path).get_data(as_text=True)
    (block,) = re.findall(
        rf'<script type="application/json" id="{block_id}">(.*?)</script>', html, re.S
    )
    return json.loads(block)


def test_last_used_is_the_provider_of_the_last_sign_in_that_worked(client, auth):
    assert _page_data(client, "/auth/signin", "chooser-data")["lastUsed"] is None
    # A refused attempt is no sign-in: nothing to remember.
    refused = auth.signin(password="wrong")
    assert "error=CredentialsSignin" in refused.headers["Location"]
    assert not any("auth.last-provider" in c for c in refused.headers.getlist("Set-Cookie"))
    assert _page_data(client, "/auth/signin", "chooser-data")["lastUsed"] is None
    answer = auth.signin()
    (cookie,) = [c for c in answer.headers.getlist("Set-Cookie") if "auth.last-provider" in c]
    assert cookie.startswith("auth.last-provider=demo;") and "HttpOnly" in cookie
    assert "Path=/auth" in cookie
    name = "Demo account (development only)"
    assert _page_data(client, "/auth/signin", "chooser-data")["lastUsed"] == {
        "id": "demo",
        "name": name,
    }
    error_page = _page_data(client, "/auth/error?error=AccessDenied", "error-page-data")
    assert error_page["lastUsed"] == name
    # A provider that is no longer offered is not named.
    client.set_cookie("auth.last-provider", "gone", path="/auth")
    assert _page_data(client, "/auth/signin", "chooser-data")["lastUsed"] is None


def test_a_page_not_found_leads_home_first(client):
    view = _page_data(client, "/no-such-page", "error-page-data")
    assert view["steps"] == [{"label": "Go to the home page", "href": "/"}]
    assert view["retry"] is False and view["lastUsed"] is None


def test_chooser_data_drops_an_unsafe_callback_url(client):
    html = client.get("/auth/signin?callbackUrl=https://evil.example/").get_data(as_text=True)
    # The forged host, and its port as a URL names it: a bare "9999" also turns up by
    # chance in the page's random hex (a CSP nonce), about once in 700 renders.
    assert "127.0.0.1" not in html and ":9999" not in html


@pytest.mark.parametrize(
    "code,first",
    [
        ("Verification", "Request a new sign-in link"),
        ("AccessDenied", "Sign in with another account"),
        ("Configuration", "Go to the home page"),
        ("Nonsense", "Try signing in again"),
    ],
)
def test_error_page_server_content_is_the_island_data(make_app, code, first):
    # A host the app answers to (an allowed alias; foreign ones get 400) but not AUTH_URL's.
    client = make_app(AUTH_ALLOWED_HOSTS="127.0.0.1").test_client()
    r = client.get(f"/auth/error?error={code}", headers={"Host": "127.0.0.1:9999"})
    html = r.get_data(as_text=True)
    (block,) = re.findall(
        r'<script type="application/json" id="error-page-data">(.*?)</script>', html, re.S
    )
    view = json.loads(block)
    assert view["requestId"] == r.headers["X-Request-ID"]
    assert view["steps"][0]["label"] == first
    # The server renders the same steps, in the same order, with the same links.
    rendered = re.findall(r'<a class="button[^"]*" href="([^"]+)">([^<]+)</a>', html)
    assert rendered == [(s["href"], s["label"]) for s in view["steps"]]
    assert {s["href"] for s in view["steps"]} == {"/auth/signin", "/"}
    # The forged host, and its port as a URL names it: a bare "9999" also turns up by
    # chance in the page's random hex (a CSP nonce), about once in 700 renders.
    assert "127.0.0.1" not in html and ":9999" not in html
