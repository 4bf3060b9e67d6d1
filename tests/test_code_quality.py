"""The code passes its own linters: ruff (lint and format) on everything, mypy on the app;
and its text points only at documents the repository holds."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A section of a specification the repository does not hold; docs/ is the contract.
OUTSIDE_REFERENCE = re.compile(r"spec\s*§|behaviou?r\.md", re.IGNORECASE)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff():
    result = run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    result = run("mypy", "webapp")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_reference_to_a_document_outside_the_repository():
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    found = []
    for name in filter(None, tracked.split("\0")):
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # not text
            continue
        found += [
            f"{name}:{number}"
            for number, line in enumerate(text.splitlines(), start=1)
            if OUTSIDE_REFERENCE.search(line)
        ]
    assert found == [], "point at docs/ instead: " + ", ".join(found)


def test_tests_share_helpers_through_support_only():
    """A test module imports what it shares from tests/support/ (or gets it as a fixture
    from a conftest), never from another test module."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                last = (node.module or "").rpartition(".")[2]
                names = [] if node.module else [alias.name for alias in node.names]
                if last.startswith("test_") or any(n.startswith("test_") for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
