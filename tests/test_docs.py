"""The documentation site (mkdocs.yml, docs/): it builds strictly, its generated reference
lists every setting the code reads, and the code of the tutorial and the how-to guides
works as written.

Every fenced block of docs/tutorial/ and docs/how-to/ says how it is checked, with a
``data-check`` attribute (``{ .python title="app.py" data-check="run" }``):

- ``run``: run here. A titled Python, HTML or text block is a file written into a fresh
  folder (blocks with the same title continue one file); a shell block runs there, with
  the development settings, after the files above it; a TOML block is an ``AUTH_CONFIG``
  the app must start with (its providers listed); a JSON block must load. Then each
  Python file is imported and its app exercised: the page's own scenario below, or, for a
  page without one, every GET view of its own signed out and signed in, none answering 5xx.
- ``env``: its ``export`` lines are settings the app must start with.
- ``parse``: cannot run here (a production command, a real provider): it must parse
  (``bash -n``, Python, TOML, JSON, Jinja).
- ``output``: what a command prints or a request answers; not copied, not run.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask
from flask.testing import FlaskClient
from jinja2 import Environment

from build_support import docs_site
from webapp import create_app
from webapp.settings import SECTIONS, Settings, Sources, current_settings, load_settings

from .support.config import TEST_SECRET
from .support.signin import DEMO_EMAIL, demo_sign_in

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The pages whose code a reader copies: every block is checked.
GUIDES = sorted([*(DOCS / "tutorial").rglob("*.md"), *(DOCS / "how-to").rglob("*.md")])
CHECKS = ("run", "env", "parse", "output")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    title: str | None
    check: str | None
    text: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    found = []
    for line, info, text in docs_site.fenced_blocks(page.read_text()):
        attributes = docs_site.block_attributes(info)
        found.append(
            Block(
                page,
                line,
                attributes.get("lang", ""),
                attributes.get("title"),
                attributes.get("check"),
                text,
            )
        )
    return found


ALL_BLOCKS = [block for page in GUIDES for block in blocks_of(page)]


def blocks(check: str, *langs: str) -> list[Any]:
    return [
        pytest.param(b, id=b.name)
        for b in ALL_BLOCKS
        if b.check == check and (not langs or b.lang in langs)
    ]


# -- the site ----------------------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link or anchor, a page missing from the
    navigation (mkdocs.yml's ``validation``) or a failing reference generator fails it."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    for page in docs_site.generated_pages():
        built = tmp_path / page.removesuffix(".md") / "index.html"
        assert built.is_file(), page
    for page in docs_site.PUBLISHED.values():
        assert (tmp_path / page.removesuffix(".md") / "index.html").is_file(), page


def test_every_markdown_file_in_docs_is_in_the_navigation() -> None:
    """mkdocs.yml's ``omitted_files: warn`` fails the strict build for a page left out;
    this says which, without a build."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    missing = sorted(p for p in pages if not re.search(rf":?\s{re.escape(p)}\s*$", nav, re.M))
    assert missing == []


#: The questions a developer asked of the documentation (issue 45), each with the
#: navigation title that answers it, its page, and what that page must show.
QUESTIONS = [
    ("add my own page", "Add your own pages and templates", "how-to/own-pages.md", "Blueprint"),
    ("protect a view", "Protect a view", "how-to/protect-a-view.md", "@login_required"),
    ("the current user", "The current user", "how-to/current-user.md", "current_user.email"),
    (
        "add GitHub",
        "GitHub and other OAuth 2 sites",
        "how-to/providers/oauth-sites.md",
        "## GitHub",
    ),
    ("deploy", "Deploy behind nginx or HAProxy", "how-to/deploy.md", "## The production command"),
]


@pytest.mark.parametrize(
    ("question", "title", "page", "shows"), QUESTIONS, ids=[q[0] for q in QUESTIONS]
)
def test_the_navigation_answers_a_developer_s_question(
    question: str, title: str, page: str, shows: str
) -> None:
    """Found from the navigation alone: a title that says it, leading to a page that does."""
    nav = (ROOT / "mkdocs.yml").read_text()
    assert re.search(rf"^\s*- {re.escape(title)}: {re.escape(page)}\s*$", nav, re.M), question
    assert shows in (DOCS / page).read_text(), question


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 220
    assert "./scripts/dev     # run the app on http://localhost:5000" in readme
    assert "./scripts/test    # run the whole test suite" in readme


# -- the generated reference -------------------------------------------------------------


def _names_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> set[str]:
    """Every setting name the settings code asks its sources for, in development, in
    production, from a TOML file with every table, and from a Flask app's config."""
    read: set[str] = set()
    original = Sources.get

    def recording(self: Sources, setting: Any) -> Any:
        read.add(setting.name)
        return original(self, setting)

    monkeypatch.setattr(Sources, "get", recording)
    toml = tmp_path / "auth.toml"
    toml.write_text(
        '[auth]\nenv = "development"\n[auth.brand]\nname = "Acme"\n'
        '[auth.pages]\nsignIn = "/login"\n'
    )
    load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    load_settings({"AUTH_CONFIG": str(toml)}, instance_path=tmp_path)
    load_settings(
        {
            "APP_ENV": "production",
            "AUTH_SECRET": TEST_SECRET,
            "AUTH_URL": "https://example.com/auth",
            "DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3",
            "EMAIL_SERVER": "smtp://127.0.0.1:1025",
        },
        instance_path=tmp_path,
    )
    return read


def test_the_settings_reference_lists_every_setting_the_code_reads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    read = _names_read(monkeypatch, tmp_path)
    declared = set(docs_site.declared_setting_names())
    assert read - declared == set(), "read but not declared in a section's SETTINGS"
    page = docs_site.settings_page()
    listed = set(re.findall(r"^\| `([A-Z][A-Z0-9_<>]+)` \|", page, re.M))
    assert read <= listed
    assert declared == listed
    # The presets' variables are read by pattern: the reference names the pattern.
    assert {"AUTH_<PRESET>_ID", "AUTH_<PRESET>_SECRET", "AUTH_<PRESET>_ISSUER"} <= listed


def test_a_setting_s_field_default_is_what_the_code_reads_when_it_is_unset(
    tmp_path: Path,
) -> None:
    """The reference shows a field's default: with nothing set, that is the value."""
    conf = load_settings({"APP_ENV": "development"}, instance_path=tmp_path)
    for _, declared in SECTIONS:
        for setting in declared.values():
            if setting.field is None:
                continue
            assert hasattr(Settings, setting.field), setting.name
            if setting.default is None:
                expected = getattr(Settings, setting.field)
                assert getattr(conf, setting.field) == expected, setting.name


def test_the_command_reference_lists_every_command() -> None:
    from webapp.cli import auth_cli

    page = docs_site.cli_page()
    for path, command in docs_site._commands(auth_cli, ["flask", "auth"]):
        if not hasattr(command, "commands"):
            assert f"## {' '.join(path)}\n" in page, path


def test_the_api_reference_documents_every_public_name() -> None:
    import webapp.auth

    page = docs_site.api_page()
    for name in webapp.auth.__all__:
        section = page.split(f"### `{name}`\n", 1)
        assert len(section) == 2, name
        assert section[1].split("\n### ", 1)[0].strip(), f"{name} has no documentation"


# -- the guides' code blocks -------------------------------------------------------------


def test_every_block_of_the_guides_says_how_it_is_checked() -> None:
    unmarked = [b.name for b in ALL_BLOCKS if b.check not in CHECKS]
    assert unmarked == []
    untitled = [
        b.name
        for b in ALL_BLOCKS
        if b.check == "run" and b.lang in ("python", "html", "text") and not b.title
    ]
    assert untitled == [], "a file to run needs its name (title)"
    unknown = [
        b.name
        for b in ALL_BLOCKS
        if b.check == "run" and b.lang not in ("python", "html", "text", "sh", "toml", "json")
    ]
    assert unknown == []


@pytest.mark.parametrize("block", blocks("parse"))
def test_a_block_that_cannot_run_here_parses(block: Block, tmp_path: Path) -> None:
    check_parses(block, tmp_path)


def check_parses(block: Block, tmp_path: Path) -> None:
    text = block.text
    assert text.strip(), "empty"
    if block.lang == "python":
        ast.parse(text)
    elif block.lang in ("sh", "bash"):
        script = tmp_path / "block.sh"
        script.write_text(text)
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    elif block.lang == "toml":
        tomllib.loads(text)
    elif block.lang == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError:
            json.loads("{" + text + "}")  # some keys to add to an object
    elif block.lang == "html":
        Environment(extensions=["jinja2.ext.i18n"]).parse(text)
    elif block.lang == "sql":
        assert sqlite3.complete_statement(text), "an unfinished statement"
    # nginx: tests/test_proxy_e2e.py runs the deploy guide's snippet in nginx itself.


# -- settings blocks: the app starts with them --------------------------------------------


def development_environment(folder: Path) -> dict[str, str]:
    """The settings the guides' code runs with: development, on a SQLite file and an outbox
    in ``folder``, with a fixed secret."""
    return {
        "APP_ENV": "development",
        "AUTH_SECRET": TEST_SECRET,
        "DATABASE_URL": f"sqlite:///{folder}/docs.sqlite3",
        "EMAIL_OUTBOX": str(folder / "outbox"),
    }


def _clean_process_environment() -> dict[str, str]:
    """This process's environment without any setting of the app's."""
    prefixes = ("AUTH_", "EMAIL_", "DATABASE_", "DB_", "APP_ENV", "FLASK_", "AUDIT_")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def start(environ: dict[str, str]) -> Flask:
    return create_app({"TESTING": True}, environ=environ, migrations=False)


def provider_ids(app: Flask) -> set[str]:
    with app.app_context():
        origin = current_settings().origin
    answer = app.test_client().get("/auth/providers", base_url=origin)
    assert answer.status_code == 200
    return set(answer.get_json())


def exported(block: Block, folder: Path) -> dict[str, str]:
    """The variables a block's ``export`` lines set, as bash sets them."""
    exports = "\n".join(
        line for line in block.text.splitlines() if line.strip().startswith("export ")
    )
    assert exports, "no export line"
    env = {**_clean_process_environment(), "PATH": f"{sys.prefix}/bin:{os.environ['PATH']}"}
    dump = '"$0" -c "import json, os; print(json.dumps(dict(os.environ)))"'
    result = subprocess.run(
        ["bash", "-euc", f"{exports}\n{dump}", sys.executable],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    after: dict[str, str] = json.loads(result.stdout)
    return {k: v for k, v in after.items() if env.get(k) != v and k not in ("PWD", "SHLVL", "_")}


@pytest.mark.parametrize("block", blocks("env"))
def test_the_app_starts_with_the_settings_of_an_env_block(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_parses(block, tmp_path)
    write_files(block.page, tmp_path)  # files the settings name (EMAIL_TEMPLATES)
    monkeypatch.chdir(tmp_path)
    settings = exported(block, tmp_path)
    app = start({**development_environment(tmp_path), **settings})
    presets = {
        m[1].lower().replace("_", "-")
        for name in settings
        if (m := re.fullmatch(r"AUTH_(.+)_ID", name)) and name != "AUTH_PASSKEY_RP_ID"
    }
    assert presets <= provider_ids(app)


@pytest.mark.parametrize("block", blocks("run", "toml"))
def test_the_app_starts_with_a_toml_block_as_its_configuration_file(
    block: Block, tmp_path: Path
) -> None:
    config = tomllib.loads(block.text)
    path = tmp_path / Path(block.title or "auth.toml").name
    path.write_text(block.text)
    environ = {**development_environment(tmp_path), "AUTH_CONFIG": str(path)}
    for provider in config.get("providers", []):
        if "client_secret_env" in provider:
            environ[provider["client_secret_env"]] = "a-client-secret-from-the-environment"
        if "client_private_key_file" in provider:
            write_key(tmp_path / provider["client_private_key_file"])
    app = start(environ)
    assert {p["id"] for p in config.get("providers", [])} <= provider_ids(app)


def write_key(path: Path) -> None:
    """A P-256 private key in PEM, as Apple and ``private_key_jwt`` take."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


@pytest.mark.parametrize("block", blocks("run", "json"))
def test_a_json_block_loads(block: Block) -> None:
    json.loads(block.text)


# -- pages whose code runs ---------------------------------------------------------------


def write_files(page: Path, folder: Path) -> list[Path]:
    """Write the page's titled run blocks (Python, HTML, text) into ``folder``; blocks with
    the same title continue the same file. Returns the Python files, in page order."""
    written: dict[Path, str] = {}
    for block in blocks_of(page):
        if block.check == "run" and block.lang in ("python", "html", "text") and block.title:
            path = folder / block.title
            joined = written.get(path, "")
            written[path] = joined + ("\n\n" if joined else "") + block.text
    for path, text in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return [p for p in written if p.suffix == ".py"]


RUNNABLE_PAGES = sorted(
    {b.page for b in ALL_BLOCKS if b.check == "run" and b.lang in ("python", "html", "text", "sh")}
)


@dataclass
class Workspace:
    """A fresh folder with the checkout's ``app.py`` and virtualenv, and the development
    settings, in which a page's blocks run."""

    folder: Path
    environ: dict[str, str]

    def run_shell(self, block: Block) -> subprocess.CompletedProcess[str]:
        env = {
            **_clean_process_environment(),
            **self.environ,
            "PATH": f"{self.folder / '.venv' / 'bin'}:{os.environ['PATH']}",
        }
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=self.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / ".venv").symlink_to(sys.prefix)
    (folder / "app.py").write_text((ROOT / "app.py").read_text())
    environ = development_environment(folder)
    for name in list(os.environ):
        if name.startswith(("AUTH_", "EMAIL_", "DATABASE_", "DB_", "APP_ENV", "AUDIT_")):
            monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(folder)
    # The database the commands run on, with ann@example.com in it (the guides name her).
    app = create_app(environ=environ)  # development: it migrates its database
    assert demo_sign_in(app.test_client()).status_code == 302
    yield Workspace(folder, environ)


def load_module(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    name = "docs_" + re.sub(r"\W", "_", str(path.relative_to(path.parents[1])))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # Flask finds the app's folder by it
    spec.loader.exec_module(module)
    return module


def csrf_token(client: FlaskClient) -> str:
    return str(client.get("/auth/csrf").get_json()["csrfToken"])


def own_get_views(app: Flask, module: ModuleType) -> list[str]:
    """The GET routes without arguments whose views the module defines."""
    return [
        rule.rule
        for rule in app.url_map.iter_rules()
        if "GET" in (rule.methods or ())
        and not rule.arguments
        and getattr(app.view_functions.get(rule.endpoint), "__module__", None) == module.__name__
    ]


def smoke(app: Flask, module: ModuleType) -> None:
    """Every GET view of the module's own answers without a server error, signed out and
    signed in with the demo account."""
    client = app.test_client()
    paths = own_get_views(app, module)
    for path in paths:
        assert client.get(path).status_code < 500, path
    if "demo" in provider_ids(app):
        assert demo_sign_in(client).status_code == 302
        for path in paths:
            assert client.get(path).status_code < 500, path


Scenario = Callable[[dict[str, ModuleType], pytest.MonkeyPatch, pytest.LogCaptureFixture], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(page: str) -> Callable[[Scenario], Scenario]:
    def register(function: Scenario) -> Scenario:
        SCENARIOS[page] = function
        return function

    return register


@pytest.mark.parametrize(
    "page", [pytest.param(p, id=str(p.relative_to(DOCS))) for p in RUNNABLE_PAGES]
)
def test_the_code_of_a_guide_runs(
    page: Path,
    workspace: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    python_files = write_files(page, workspace.folder)
    for block in blocks_of(page):
        if block.check == "run" and block.lang == "sh":
            result = workspace.run_shell(block)
            assert result.returncode == 0, f"{block.name}: {shlex.quote(block.text)}\n" + (
                result.stdout[-2000:] + result.stderr[-4000:]
            )
    modules = {
        path.relative_to(workspace.folder).as_posix(): load_module(path, monkeypatch)
        for path in python_files
    }
    key = page.relative_to(DOCS).as_posix()
    if key in SCENARIOS:
        SCENARIOS[key](modules, monkeypatch, caplog)
    else:
        for module in modules.values():
            app = getattr(module, "app", None)
            assert isinstance(app, Flask), f"{module.__file__} makes no app"
            smoke(app, module)


# -- each page's own scenario ------------------------------------------------------------


@scenario("tutorial/your-own-page.md")
def _your_own_page(modules: dict[str, ModuleType], *_: Any) -> None:
    app = modules["hello/app.py"].app
    client = app.test_client()
    assert "Say hello" in client.get("/").get_data(as_text=True)
    signed_out = client.get("/hello")
    assert signed_out.status_code == 302
    assert "/auth/signin?error=SessionRequired&callbackUrl=" in signed_out.location
    assert demo_sign_in(client).status_code == 302
    page = client.get("/hello").get_data(as_text=True)
    assert "Hello, ann" in page and f"You are signed in as <strong>{DEMO_EMAIL}</strong>" in page


@scenario("how-to/protect-a-view.md")
def _protect_a_view(modules: dict[str, ModuleType], *_: Any) -> None:
    client = modules["views.py"].app.test_client()
    assert client.get("/dashboard").status_code == 302
    assert client.post("/api/notes").status_code == 401  # no bearer token
    assert demo_sign_in(client).status_code == 302
    assert client.get("/dashboard").get_data(as_text=True) == f"Signed in as {DEMO_EMAIL}"
    assert client.get("/admin").status_code == 200
    changed = client.post("/billing/card", data={"csrfToken": csrf_token(client)})
    assert changed.get_data(as_text=True) == "Card changed"
    assert client.post("/billing/card").status_code == 400  # no CSRF token


@scenario("how-to/current-user.md")
def _current_user(modules: dict[str, ModuleType], *_: Any) -> None:
    client = modules["whoami.py"].app.test_client()
    assert client.get("/me").status_code == 302
    assert demo_sign_in(client).status_code == 302
    me = client.get("/me").get_json()
    assert me["email"] == DEMO_EMAIL and me["signedInWith"] == "demo" and me["provedAt"]
    assert client.get("/auth/session").get_json()["userId"] == me["id"]


@scenario("how-to/own-pages.md")
def _own_pages(modules: dict[str, ModuleType], *_: Any) -> None:
    client = modules["mypages.py"].app.test_client()
    assert client.get("/notes").status_code == 302
    assert demo_sign_in(client).status_code == 302
    assert "Notes of ann" in client.get("/notes").get_data(as_text=True)
    saved = client.post("/notes", data={"csrfToken": csrf_token(client), "text": "milk"})
    assert saved.status_code == 302
    assert "Saved: milk" in client.get("/notes").get_data(as_text=True)


@scenario("how-to/providers/credentials.md")
def _credentials(modules: dict[str, ModuleType], *_: Any) -> None:
    client = modules["passwords.py"].app.test_client()
    wrong = {"csrfToken": csrf_token(client), "email": DEMO_EMAIL, "password": "guess"}
    assert "error=CredentialsSignin" in client.post("/auth/callback/password", data=wrong).location
    right = {**wrong, "password": "correct horse battery"}
    assert client.post("/auth/callback/password", data=right).status_code == 302
    session = client.get("/auth/session").get_json()
    assert session["user"] == {"name": "Ann", "email": DEMO_EMAIL, "image": None}


@scenario("how-to/providers/email.md")
def _own_mail_delivery(
    modules: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch, *_: Any
) -> None:
    module = modules["mailer.py"]
    sent: list[bytes] = []

    class Answer:
        def raise_for_status(self) -> None:
            return None

    def post(url: str, *, data: bytes, **_: Any) -> Answer:
        assert url == "https://mail-api.example.com/v1/send"
        sent.append(data)
        return Answer()

    monkeypatch.setattr(module.requests, "post", post)
    client = module.app.test_client()
    form = {"csrfToken": csrf_token(client), "email": DEMO_EMAIL}
    answer = client.post("/auth/signin/email", data=form)
    assert "/auth/verify-request" in answer.location
    assert len(sent) == 1 and b"To: ann@example.com" in sent[0]


@scenario("how-to/hooks-and-signals.md")
def _hooks_and_signals(
    modules: dict[str, ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = modules["decisions.py"].app.test_client()
    refused = demo_sign_in(client, "eve@blocked.example")
    assert "AccessDenied" in refused.location
    assert demo_sign_in(client).status_code == 302
    assert "userId" in client.get("/auth/session").get_json()
    caplog.set_level("INFO", logger="listeners")
    other = modules["listeners.py"].app.test_client()
    assert demo_sign_in(other).status_code == 302
    assert demo_sign_in(other, password="wrong").status_code == 302
    said = [r.getMessage() for r in caplog.records if r.name == "listeners"]
    assert any(m.endswith("signed in with demo") for m in said), said
    assert any(m.startswith("refused sign-in (CredentialsSignin)") for m in said), said


@scenario("how-to/provider-api.md")
def _provider_api(modules: dict[str, ModuleType], *_: Any) -> None:
    client = modules["calendar_app.py"].app.test_client()
    assert demo_sign_in(client).status_code == 302
    # No "corp" provider here: the view's NoProviderAccount answers 404, and no request
    # leaves for the provider's API.
    assert client.get("/calendar", headers={"Accept": "application/json"}).status_code == 404
