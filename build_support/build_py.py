"""The build step that makes the wheel complete (pyproject.toml, ``[tool.setuptools.cmdclass]``).

Two things the app reads at run time are not Python files under ``webapp/``, so setuptools'
own ``build_py`` would leave them out:

* the compiled message catalogues (``webapp/translations/<code>/LC_MESSAGES/messages.mo``),
  which are built, never committed: compiled here from the ``.po`` files with Babel, as
  ``scripts/translations compile`` does in a checkout;
* the Alembic migrations, kept at the top of the repository (``migrations/``) and copied
  into the package as ``webapp/migrations/``, where an installed app finds them.

An editable install (``scripts/setup``) gets neither: a checkout compiles its catalogues in
place and reads ``migrations/`` where it is.

This lives outside ``webapp/`` because it imports setuptools, which the app does not need.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from setuptools.command.build_py import build_py

PACKAGE = "webapp"
MIGRATIONS = Path("migrations")
CATALOGUES = Path(PACKAGE, "translations")


class BuildPyWithCataloguesAndMigrations(build_py):
    """setuptools' ``build_py``, then the catalogues compiled and the migrations copied."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        package = Path(self.build_lib, PACKAGE)
        for po_file in sorted(CATALOGUES.glob("*/LC_MESSAGES/messages.po")):
            compile_catalogue(po_file, package / po_file.relative_to(PACKAGE).with_suffix(".mo"))
        copy_migrations(package / "migrations")


def compile_catalogue(po_file: Path, mo_file: Path) -> None:
    """Compile one ``.po`` file as ``pybabel compile`` does (fuzzy entries left out)."""
    locale = po_file.parent.parent.name
    with po_file.open("rb") as source:
        catalogue = read_po(source, locale=locale)
    mo_file.parent.mkdir(parents=True, exist_ok=True)
    with mo_file.open("wb") as target:
        write_mo(target, catalogue)


def copy_migrations(target: Path) -> None:
    """Copy ``migrations/`` to ``target`` anew, so a revision deleted since the last build
    (setuptools keeps its ``build/`` folder) does not linger in the wheel."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(MIGRATIONS, target, ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))
