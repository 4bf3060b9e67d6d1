"""Compiled templates shared by every app the test process builds.

Each test builds its own app, and each app's Jinja environment would compile every
template it renders again: about a quarter of a typical test's time. This cache keeps the
compiled code by template name and source checksum (Jinja checks both), so an app with a
template of its own, or a template changed on disk, still gets its own compilation.
"""

from __future__ import annotations

from flask import Flask
from jinja2.bccache import Bucket, BytecodeCache


class SharedBytecodeCache(BytecodeCache):
    """Jinja's bytecode cache, in this process's memory."""

    def __init__(self) -> None:
        self._compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        compiled = self._compiled.get(bucket.key)
        if compiled is not None:
            bucket.bytecode_from_string(compiled)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._compiled[bucket.key] = bucket.bytecode_to_string()


def share_compiled_templates() -> None:
    """Make every Flask app built from now on in this process use one template cache."""
    Flask.jinja_options = {**Flask.jinja_options, "bytecode_cache": SharedBytecodeCache()}
