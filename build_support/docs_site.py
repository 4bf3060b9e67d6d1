"""The documentation site's build hooks (mkdocs.yml names this file under ``hooks``).

The reference pages are generated here, during ``mkdocs build``, from the code itself, so
that they cannot drift from it; none of them is a committed file:

- ``reference/settings.md``: every setting, from the sections' declarations
  (``webapp.settings.SECTIONS``: name, TOML key, default, meaning);
- ``reference/cli.md``: every ``flask auth`` command, by walking its click group;
- ``reference/api.md``: ``webapp.auth.__all__``, from docstrings and ``#:`` doc comments;
- ``reference/routes.md``: the URL map of an app built here, with each view's docstring;
- ``reference/errors.md``: the error codes table (``webapp.errors.CODES``);
- ``reference/constants.md``: the ``Settings`` defaults no setting changes;
- ``reference/presets.md``: the provider presets (``webapp.oauth.presets.PRESETS``);
- ``reference/templates.md``: every template, what it extends, its blocks and the values
  it uses (Jinja's own parser).

A few documents that live beside what they describe (the changelog, the benchmark's) are
published as they are, under ``project/``. A link from a page to a file outside ``docs/``
becomes a link to its published copy, or, for a file that is not published, the file's
path in the repository.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import logging
import posixpath
import re
import tempfile
import tokenize
from collections.abc import Iterable, Iterator
from datetime import timedelta
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Documents kept beside what they describe, published on the site as they are: their path
#: in the repository, and their page on the site.
PUBLISHED = {
    "CHANGELOG.md": "project/changelog.md",
    "bench/README.md": "project/benchmarks.md",
    "bench/RESULTS.md": "project/benchmark-results.md",
}
#: The repository's README is the site's home page's summary: links to it go home.
README_PAGE = "index.md"


# -- mkdocs hooks ------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages and the published documents."""
    from mkdocs.structure.files import File

    for uri, content in generated_pages().items():
        files.append(File.generated(config, uri, content=content))
    for source, uri in PUBLISHED.items():
        files.append(File.generated(config, uri, content=(ROOT / source).read_text()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Point links that leave ``docs/`` at the site's copy, or name the repository path."""
    uri = page.file.src_uri
    source = next((s for s, u in PUBLISHED.items() if u == uri), None)
    return rewrite_links(markdown, uri, source or f"docs/{uri}")


# -- links out of docs/ ------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~)", re.M)
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")


def rewrite_links(markdown: str, page_uri: str, repo_path: str) -> str:
    """``markdown`` of the page ``page_uri`` (its file is ``repo_path`` in the repository)
    with every relative link resolved against the repository and pointed at the site."""
    parts = re.split(r"(^(?:```|~~~).*?^(?:```|~~~)[ \t]*$)", markdown, flags=re.M | re.S)
    for index in range(0, len(parts), 2):  # the odd parts are fenced code
        parts[index] = _LINK.sub(lambda m: _rewritten(m, page_uri, repo_path), parts[index])
    return "".join(parts)


def _rewritten(match: re.Match[str], page_uri: str, repo_path: str) -> str:
    text, target = match["text"], match["target"]
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
        return match[0]
    path, _, anchor = target.partition("#")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
    if resolved.startswith("docs/"):
        site_uri, keep_anchor = resolved[len("docs/") :], True
    elif resolved in PUBLISHED:
        site_uri, keep_anchor = PUBLISHED[resolved], True
    elif resolved == "README.md":
        site_uri, keep_anchor = README_PAGE, False
    else:
        shown = resolved + ("/" if path.endswith("/") else "")
        return text if shown in text else f"{text} (`{shown}`)"
    link = posixpath.relpath(site_uri, posixpath.dirname(page_uri) or ".")
    if anchor and keep_anchor:
        link += "#" + anchor
    return f"[{text}]({link})"


# -- the generated pages -----------------------------------------------------------------

GENERATED_NOTE = (
    '!!! note "Generated"\n    This page is generated from the code when the site is '
    "built ({source}); it cannot drift from it.\n"
)


def generated_pages() -> dict[str, str]:
    """Every generated page: its site path and its Markdown."""
    return {
        "reference/settings.md": settings_page(),
        "reference/cli.md": cli_page(),
        "reference/api.md": api_page(),
        "reference/routes.md": routes_page(),
        "reference/errors.md": errors_page(),
        "reference/constants.md": constants_page(),
        "reference/presets.md": presets_page(),
        "reference/templates.md": templates_page(),
    }


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table: on one line, its pipes escaped (those in
    code spans are not column separators)."""
    parts = re.split(r"(`[^`]*`)", " ".join(str(text).split()))
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)


def _paragraphs(doc: str | None) -> str:
    return inspect.cleandoc(doc) if doc else ""


def _first_paragraph(doc: str | None) -> str:
    return " ".join(_paragraphs(doc).split("\n\n")[0].split())


def _rst_to_md(text: str) -> str:
    """Docstrings write code as ``x`` (reStructuredText); Markdown writes `x`."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


# -- settings ----------------------------------------------------------------------------


def format_default(value: Any, unit: str = "seconds") -> str:
    """A field's default as a setting would be written."""
    from webapp.settings import RateLimit

    if isinstance(value, RateLimit):
        seconds = int(value.window.total_seconds())
        for size, letter in ((3600, "h"), (60, "m")):
            if seconds % size == 0:
                return f"`{value.limit}/{seconds // size}{letter}`"
        return f"`{value.limit}/{seconds}s`"
    if isinstance(value, timedelta):
        seconds = int(value.total_seconds())
        if unit == "days":
            return f"`{seconds // 86400}` (days)"
        return f"`{seconds}`" + (f" ({_spelled(seconds)})" if seconds >= 120 else "")
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _spelled(seconds: int) -> str:
    for size, word in ((31536000, "year"), (86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {word}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def setting_default(setting: Any) -> str:
    """The default the reference shows for ``setting``: its words, else its field's."""
    from webapp.settings import Settings

    if setting.default is not None:
        return str(setting.default)
    if setting.field is not None:
        return format_default(getattr(Settings, setting.field), setting.unit)
    return "none"


def settings_page() -> str:
    from webapp.settings import SECTIONS

    lines = [
        "# Settings",
        "",
        GENERATED_NOTE.format(source="the `SETTINGS` each section of `webapp/settings/` declares"),
        "Settings come from environment variables and, optionally, the TOML file that "
        "`AUTH_CONFIG` names (its `[auth]` table and its `[[providers]]`). Precedence, lowest "
        "first: the default, the TOML file, the environment, then `app.config` (an "
        "application embedding the facility; it reads the environment only when it passes "
        "it, `Auth(app, environ=os.environ)`). An empty environment variable counts as unset.",
        "",
        "Everything is checked at start-up: a bad value, or a key of the TOML file that no "
        "setting reads, stops the app with one line naming the setting (never a secret). "
        "Limits are written `count/window`, the window in `s`, `m` or `h` (`3/10m`). "
        "Timeouts are seconds, more than 0 and at most 300. Switches take `true`/`false`, "
        "`1`/`0`, `yes`/`no`, `on`/`off`.",
        "",
        "Identity providers are declared as `[[providers]]` tables "
        "([Add a provider](../how-to/providers/index.md); every key in "
        "[OAuth and OpenID Connect](../oauth.md)). Fixed values no setting changes are in "
        "[Constants](constants.md) and the contract's [constants](../constants.md).",
        "",
    ]
    for title, declared in SECTIONS:
        lines += [
            f"## {title}",
            "",
            "| setting | TOML key | default | meaning |",
            "|---|---|---|---|",
        ]
        for setting in declared.values():
            toml = f"`{setting.toml_label}`" if setting.toml_label else "—"
            lines.append(
                f"| `{setting.name}` | {toml} | {_cell(setting_default(setting))} | "
                f"{_cell(setting.meaning)} |"
            )
        lines.append("")
    return "\n".join(lines)


def declared_setting_names() -> list[str]:
    """Every declared setting's name, in the reference's order."""
    from webapp.settings import SECTIONS

    return [name for _, declared in SECTIONS for name in declared]


# -- the flask auth commands -------------------------------------------------------------


def cli_page() -> str:
    import click

    from webapp.cli import auth_cli

    lines = [
        "# `flask auth` commands",
        "",
        GENERATED_NOTE.format(source="the click group `webapp.cli.auth_cli`"),
        "Run them with the same settings as the app: `flask --app app auth …` in a checkout, "
        "`flask --app webapp:create_app auth …` with the installed package, or your own "
        "app's name when you embed the facility. `flask auth --version` prints the installed "
        "distribution and version and needs no settings. The schema's own Alembic commands "
        "are Flask-Migrate's `flask db …` (`upgrade`, `downgrade`, `current`).",
        "",
        _rst_to_md(_paragraphs(auth_cli.help)),
        "",
    ]
    for path, command in _commands(auth_cli, ["flask", "auth"]):
        if isinstance(command, click.Group):
            continue
        lines += _command_section(path, command)
    return "\n".join(lines)


def _commands(group: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    import click

    for name, command in group.commands.items():
        yield [*path, name], command
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])


def _command_section(path: list[str], command: Any) -> list[str]:
    import click

    ctx = click.Context(command, info_name=" ".join(path))
    usage = " ".join([*path, *command.collect_usage_pieces(ctx)])
    lines = [
        f"## {' '.join(path)}",
        "",
        "```",
        usage,
        "```",
        "",
        _rst_to_md(_paragraphs(command.help)),
        "",
    ]
    rows = []
    for param in command.params:
        if isinstance(param, click.Argument):
            rows.append(f"| `{param.human_readable_name}` (argument) | {_cell('required')} | |")
            continue
        if not isinstance(param, click.Option) or param.hidden:
            continue
        names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        if param.is_flag:
            kind = "flag"
        elif isinstance(param.type, click.Choice):
            kind = "one of " + ", ".join(f"`{c}`" for c in param.type.choices)
        else:
            kind = f"`{param.type.name.upper()}`" + (", required" if param.required else "")
            if param.default is not None and param.show_default:
                kind += f", default `{param.default}`"
        if param.multiple:
            kind += ", repeatable"
        rows.append(f"| {names} | {kind} | {_cell(param.help or '')} |")
    if rows:
        lines += ["| option | value | meaning |", "|---|---|---|", *rows, ""]
    return lines


# -- the public API ----------------------------------------------------------------------


def doc_comments(source: str) -> dict[str, str]:
    """The ``#:`` comments written above names in ``source`` (a module or a class body):
    ``{name: text}``, as Sphinx reads them."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("#:"):
            pending.append(token.string[2:].strip())
        elif token.type == tokenize.NAME and pending:
            found[token.string] = " ".join(pending)
            pending = []
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            pending = []
    return found


def api_page() -> str:
    import webapp.auth as public

    lines = [
        "# Public API: `webapp.auth`",
        "",
        GENERATED_NOTE.format(source="`webapp.auth.__all__`, its docstrings and doc comments"),
        _rst_to_md(_paragraphs(public.__doc__)),
        "",
    ]
    groups: dict[str, list[str]] = {
        "The extension": [],
        "Hooks": [],
        "Signals": [],
        "Functions and decorators": [],
        "Exceptions": [],
        "Other names": [],
    }
    for name in public.__all__:
        obj = getattr(public, name)
        groups[_group_of(name, obj)] += _api_entry(name, obj)
    for title, entries in groups.items():
        if entries:
            lines += [f"## {title}", "", *entries]
    return "\n".join(lines)


def _group_of(name: str, obj: Any) -> str:
    from blinker import Signal

    if isinstance(obj, Signal):
        return "Signals"
    if inspect.isclass(obj) and issubclass(obj, Exception):
        return "Exceptions"
    if name == "Auth":
        return "The extension"
    if name in ("AuthHooks", "UserInfo"):
        return "Hooks"
    if inspect.isfunction(obj):
        return "Functions and decorators"
    return "Other names"


def _api_entry(name: str, obj: Any) -> list[str]:
    from blinker import Signal

    if isinstance(obj, Signal):
        module = inspect.getmodule(_signal_home(obj)) or _signal_home(obj)
        comment = _rst_to_md(doc_comments(inspect.getsource(module)).get(name, ""))
        return [f"### `{name}`", "", comment, ""]
    if inspect.isfunction(obj):
        signature = str(inspect.signature(obj)).replace("'", "")
        return [
            f"### `{name}`",
            "",
            "```python",
            f"{name}{signature}",
            "```",
            "",
            _rst_to_md(_paragraphs(obj.__doc__)),
            "",
        ]
    if inspect.isclass(obj):
        return _class_entry(name, obj)
    doc = _paragraphs(type(obj).__doc__)
    return [
        f"### `{name}`",
        "",
        f"An instance of `{type(obj).__name__}`.",
        "",
        _rst_to_md(doc),
        "",
    ]


def _signal_home(signal: Any) -> ModuleType:
    import webapp.core.hooks

    return webapp.core.hooks


def _class_entry(name: str, cls: type) -> list[str]:
    lines = [f"### `{name}`", ""]
    if issubclass(cls, Enum):
        lines += [_rst_to_md(_paragraphs(cls.__doc__)), "", "| member | value |", "|---|---|"]
        lines += [f"| `{m.name}` | `{m.value}` |" for m in cls]
        return [*lines, ""]
    try:
        signature = str(inspect.signature(cls)).replace("'", "")
    except (TypeError, ValueError):
        signature = "(...)"
    lines += ["```python", f"{name}{signature}", "```", "", _rst_to_md(_paragraphs(cls.__doc__))]
    comments = doc_comments(inspect.getsource(cls))
    if dataclasses.is_dataclass(cls):
        lines += ["", "| field | type | meaning |", "|---|---|---|"]
        for field in dataclasses.fields(cls):
            meaning = _rst_to_md(comments.get(field.name, ""))
            lines.append(f"| `{field.name}` | `{field.type}` | {_cell(meaning)} |")
    methods = [
        (n, m)
        for n, m in vars(cls).items()
        if inspect.isfunction(m) and not n.startswith("_") and m.__doc__
    ]
    for method_name, method in methods:
        signature = str(inspect.signature(method)).replace("'", "")
        lines += [
            "",
            f"`{name}.{method_name}{signature}`",
            ": " + _rst_to_md(_paragraphs(method.__doc__)).replace("\n", "\n  "),
        ]
    return [*lines, ""]


# -- routes ------------------------------------------------------------------------------

#: The app the routes page is built from: every feature on (passkeys too), on a SQLite file
#: it never opens, with no provider (the routes do not depend on them).
_ROUTES_APP_CONFIG = {
    "APP_ENV": "development",
    "AUTH_SECRET": "documentation-" + "x" * 40,
    "AUTH_URL": "http://localhost:5000/auth",
    "AUTH_PASSKEYS": "true",
    "TESTING": True,
}


@functools.cache
def documentation_app() -> Any:
    """The app the routes and templates pages are read from (built once per build)."""
    from webapp import create_app

    folder = tempfile.mkdtemp(prefix="webapp-docs-")
    config = {
        **_ROUTES_APP_CONFIG,
        "DATABASE_URL": f"sqlite:///{folder}/docs.sqlite3",
        "EMAIL_OUTBOX": f"{folder}/outbox",
    }
    quiet = logging.getLogger("webapp")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # its start-up lines are about this throwaway app
    try:
        return create_app(config, environ={}, migrations=False)
    finally:
        quiet.setLevel(level)


def routes_page() -> str:
    app = documentation_app()
    lines = [
        "# Routes",
        "",
        GENERATED_NOTE.format(
            source="the URL map of an app built with `AUTH_URL` `http://localhost:5000/auth`"
        ),
        "Every route the facility adds, with the view that answers it. `/auth` is "
        "`AUTH_URL`'s path: another path moves every auth route under it. What each answers "
        "(status codes, JSON shapes, cookies) is the contract's [routes](../routes.md); the "
        "error codes are in [Error codes](errors.md).",
        "",
        "| route | methods | what it does | view |",
        "|---|---|---|---|",
    ]
    sections = _contract_sections()
    rules = sorted(app.url_map.iter_rules(), key=lambda r: (r.rule, r.endpoint))
    for rule in rules:
        methods = ", ".join(sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}))
        view = app.view_functions.get(rule.endpoint)
        doc = _rst_to_md(_first_paragraph(getattr(view, "__doc__", None)))
        section = _contract_section(rule.rule, sections)
        if section:
            link = f"[`{section[0]}`](../routes.md#{section[1]})"
            doc = (doc + " " if doc else "") + f"Contract: {link}."
        lines.append(f"| `{rule.rule}` | {methods} | {_cell(doc) or '—'} | `{rule.endpoint}` |")
    lines.append("")
    return "\n".join(lines)


def _contract_sections() -> list[tuple[str, str]]:
    """The headings of the contract's routes page: (text, anchor), as the site's table of
    contents makes anchors (Python-Markdown's ``toc``)."""
    from markdown.extensions.toc import slugify, unique

    used: set[str] = set()
    found = []
    for line in (ROOT / "docs" / "routes.md").read_text().splitlines():
        match = re.match(r"^#{2,3} (.+)$", line)
        if match:
            text = match[1].strip()
            found.append((text.replace("`", ""), unique(slugify(text.replace("`", ""), "-"), used)))
    return found


def _contract_section(rule: str, sections: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The contract's section about the route ``rule``, if it has one."""
    path = re.sub(r"<[^>]*>", "<id>", rule)
    if path.startswith("/auth/"):
        wanted = path[len("/auth/") :]
        for text, anchor in sections:
            if re.search(rf"(^|\s){re.escape(wanted)}$", text):
                return text, anchor
    for prefix, heading in (
        ("/account/api", "JSON endpoints (/account/api)"),
        ("/account", "The account area"),
        ("/healthz", "Health checks: GET /healthz and GET /readyz"),
        ("/readyz", "Health checks: GET /healthz and GET /readyz"),
        ("/language", "Pages"),
    ):
        if path.startswith(prefix):
            return next(((t, a) for t, a in sections if t == heading), None)
    return None


# -- error codes -------------------------------------------------------------------------


def errors_page() -> str:
    from webapp import errors

    where = {
        errors.SIGNIN_PAGE: "sign-in page",
        errors.ERROR_PAGE: "error page",
        errors.ACCOUNT: "account area",
    }
    lines = [
        "# Error codes",
        "",
        GENERATED_NOTE.format(source="`webapp.errors.CODES`"),
        "Every refusal the app explains has a stable code: Auth.js's codes where Auth.js has "
        "one. A sign-in page code is shown in place on the sign-in page "
        "(`/auth/signin?error=<code>`), an error page code on `/auth/error?error=<code>`, an "
        'account area code in place on its pages or as `{"error": code, "message": …}` '
        "from `/account/api`. The texts below are the English ones; each is translated. "
        "Where each code arises is the contract's [errors](../errors.md).",
        "",
        "| code | shown on | HTTP status | title | message | what the person can do |",
        "|---|---|---|---|---|---|",
    ]
    for code, meaning in errors.CODES.items():
        lines.append(
            f"| `{code}` | {where.get(meaning.shown_on, meaning.shown_on)} | {meaning.status} "
            f"| {_cell(meaning.title)} | {_cell(meaning.message)} | {_cell(meaning.action)} |"
        )
    lines.append("")
    return "\n".join(lines)


# -- constants ---------------------------------------------------------------------------


def fields_read_by_settings() -> set[str]:
    """The ``Settings`` fields the section readers fill: the string keys of the dicts the
    ``read_*`` functions return, and the keywords ``settings_from`` passes itself."""
    read: set[str] = set()
    for path in (ROOT / "webapp" / "settings").glob("*.py"):
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and function.name.startswith("read_"):
                for node in ast.walk(function):
                    if isinstance(node, ast.Dict):
                        read |= {
                            k.value
                            for k in node.keys
                            if isinstance(k, ast.Constant) and isinstance(k.value, str)
                        }
            if isinstance(function, ast.Call) and getattr(function.func, "id", "") == "Settings":
                read |= {k.arg for k in function.keywords if k.arg}
    return read


def constants_page() -> str:
    from webapp.settings import Settings

    comments = doc_comments((ROOT / "webapp" / "settings" / "model.py").read_text())
    read = fields_read_by_settings()
    lines = [
        "# Constants",
        "",
        GENERATED_NOTE.format(source="the `Settings` dataclass in `webapp/settings/model.py`"),
        "The defaults of `Settings` that no setting changes: changing one is a change to the "
        "code. Every setting's default is in [Settings](settings.md); every other fixed value "
        "(lengths, sizes, algorithms) is in the contract's [constants](../constants.md).",
        "",
        "| value | field | meaning |",
        "|---|---|---|",
    ]
    for field in dataclasses.fields(Settings):
        if field.name in read or field.default is dataclasses.MISSING:
            continue
        lines.append(
            f"| {format_default(field.default)} | `{field.name}` | "
            f"{_cell(_rst_to_md(comments.get(field.name, '')))} |"
        )
    lines.append("")
    return "\n".join(lines)


# -- provider presets --------------------------------------------------------------------


def presets_page() -> str:
    from webapp.oauth.presets import PRESETS

    lines = [
        "# Provider presets",
        "",
        GENERATED_NOTE.format(source="`webapp.oauth.presets.PRESETS`"),
        "A preset is a provider with its endpoints, scopes and quirks filled in. Enable one "
        "with `AUTH_<PRESET>_ID`, `AUTH_<PRESET>_SECRET` (and `AUTH_<PRESET>_ISSUER` where "
        'it says *required*), or in the TOML file with `preset = "<id>"`. Register the '
        "callback URL with the provider; the logout URLs matter only with `logout = "
        '"rp-initiated"` or `backchannel_logout = true`. What to do at each provider: '
        "[Add a provider](../how-to/providers/index.md).",
        "",
        "| preset | button | kind | issuer | scope | client authentication | callback URL | "
        "logout URLs | extra keys |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for preset_id, preset in PRESETS.items():
        issuer = (
            f"`{preset.issuer}`"
            if preset.issuer
            else ("**required**" if preset.type == "oidc" else "—")
        )
        logout = (
            f"`{{AUTH_URL}}/signout/callback`, `{{AUTH_URL}}/backchannel-logout/{preset_id}`"
            if preset.type == "oidc"
            else "—"
        )
        extra = ", ".join(f"`{f}`" for f in preset.extra_fields) or "—"
        scope = f"`{preset.scope}`" if preset.scope else "`openid email profile`"
        lines.append(
            f"| `{preset_id}` | {preset.name} | {preset.type} | {issuer} | {scope} | "
            f"`{preset.token_endpoint_auth_method}` | `{{AUTH_URL}}/callback/{preset_id}` | "
            f"{logout} | {extra} |"
        )
    lines.append("")
    return "\n".join(lines)


# -- templates ---------------------------------------------------------------------------

#: What every template is given, so the templates page lists only each one's own values.
_TEMPLATE_GLOBALS = frozenset(
    {
        "_",
        "gettext",
        "ngettext",
        "brand",
        "auth_base",
        "current_user",
        "csrf_token",
        "asset_url",
        "current_language",
        "languages",
        "url_for",
        "get_flashed_messages",
        "request",
        "config",
        "session",
        "g",
        "self",
        "loop",
        "varargs",
        "kwargs",
    }
)


def templates_page() -> str:
    from jinja2 import meta, nodes

    folder = ROOT / "webapp" / "templates"
    env = documentation_app().jinja_env
    lines = [
        "# Templates",
        "",
        GENERATED_NOTE.format(source="the files under `webapp/templates/`, read by Jinja"),
        "Your app's templates are searched before ours, so a file of yours at the same path "
        "(`templates/auth/signin.html`) replaces ours; e-mails are also searched in "
        "`EMAIL_TEMPLATES`. Every page is also given `brand`, `auth_base`, `current_user`, "
        "`csrf_token()`, `asset_url()`, `current_language()` and `_()`. How to: "
        "[Override our pages and e-mails](../how-to/override-pages.md).",
        "",
        "| template | extends | blocks it defines | values it uses |",
        "|---|---|---|---|",
    ]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        tree = env.parse(path.read_text())
        parents = [
            n.template.value
            for n in tree.find_all(nodes.Extends)
            if isinstance(n.template, nodes.Const)
        ]
        blocks = [n.name for n in tree.find_all(nodes.Block)]
        used = sorted(meta.find_undeclared_variables(tree) - _TEMPLATE_GLOBALS)
        lines.append(
            f"| `{name}` | {', '.join(f'`{p}`' for p in parents) or '—'} | "
            f"{', '.join(f'`{b}`' for b in blocks) or '—'} | "
            f"{', '.join(f'`{v}`' for v in used) or '—'} |"
        )
    lines.append("")
    return "\n".join(lines)


# -- used by the tests -------------------------------------------------------------------


def fenced_blocks(markdown: str) -> Iterable[tuple[int, str, str]]:
    """Each fenced block of ``markdown``: its line number, its info string, its text."""
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        match = re.match(r"^(\s*)(```+|~~~+)(.*)$", lines[index])
        if not match:
            index += 1
            continue
        indent, fence, info = match.groups()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        yield index + 1, info.strip(), "\n".join(body) + "\n"
        index = end + 1


def block_attributes(info: str) -> dict[str, str]:
    """The attributes of a fenced block's info string: ``{ .python title="app.py"
    data-check="run" }`` gives ``{"lang": "python", "title": "app.py", "check": "run"}``."""
    found: dict[str, str] = {}
    text = info.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
        for key, value in re.findall(r'([\w-]+)="([^"]*)"', text):
            found[key.removeprefix("data-")] = value
        classes = re.findall(r"(?:^|\s)\.([\w+-]+)", text)
        if classes:
            found["lang"] = classes[0]
    elif text:
        found["lang"] = text.split()[0]
    return found
