"""The layering as tests: the import-linter contracts in pyproject.toml (the folders are the
layers; no two packages, and no two modules side by side, import each other, directly or
in a circle, counting imports inside functions; the OAuth protocol pieces import no
Flask), folders of at most twelve modules, and use cases that never read the request."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "webapp"
#: Most modules side by side in one folder: more, and a folder stops saying what it holds.
MAX_MODULES = 12
#: The packages below the HTTP edge that must take plain values, never the request.
PLAIN_VALUE_PACKAGES = ("flows", "providers", "oauth", "saml")


def _modules(folder: Path) -> list[Path]:
    return [p for p in folder.glob("*.py") if p.name != "__init__.py"]


def _packages() -> list[Path]:
    return [p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts]


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


def test_no_folder_holds_more_than_twelve_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): len(_modules(folder))
        for folder in _packages()
        if len(_modules(folder)) > MAX_MODULES
    }
    assert crowded == {}


def test_every_package_says_what_it_holds() -> None:
    silent = [
        str(folder.relative_to(ROOT))
        for folder in _packages()
        if ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) is None
    ]
    assert silent == []


@pytest.mark.parametrize("package", PLAIN_VALUE_PACKAGES)
def test_below_the_edge_nothing_reads_the_request(package: str) -> None:
    """Flows, providers and the OAuth pieces take the client's address and cookie values as
    arguments: ``flask.request`` is read by the HTTP edge (``webapp.web``)."""
    readers = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            imported = isinstance(node, ast.ImportFrom) and node.module == "flask"
            if imported and any(alias.name == "request" for alias in node.names):
                readers.append(str(path.relative_to(ROOT)))
            if isinstance(node, ast.Attribute) and node.attr == "request":
                if isinstance(node.value, ast.Name) and node.value.id == "flask":
                    readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_every_side_transaction_is_named_in_one_place() -> None:
    """A module that opens a transaction of its own is one that
    ``webapp.storage.transactions`` names (its docstring is the list; where commits may be
    written is tests/test_transactions.py's)."""
    from webapp.storage import transactions

    listed = transactions.__doc__ or ""
    unnamed = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module in ("webapp.storage.transactions", "webapp.storage.database", "webapp.cli"):
            continue  # the rule itself, the engine's helpers, the commands' own boundary
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                target = ast.unparse(func)
                opens = name == "autocommit_connection" or (
                    name in ("begin", "connect") and "engine" in target
                )
                if opens and module not in listed:
                    unnamed.add(f"{module}: {target}()")
    assert unnamed == set()
