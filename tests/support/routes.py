"""Every route of the app and each method it is probed with, read from the URL map (so a new
route is covered without editing a test): tests/test_hostile_input.py sends hostile input
to each, tests/test_signed_out_bounds.py checks what a signed-out client can make them do."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from webapp import create_app
from webapp.storage.db import db

from .config import base_config

#: Every method sent to every route; those a route does not allow must get a 405.
PROBED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND")
#: Methods that get a test item of their own where a route allows them.
SWEPT_METHODS = ("GET", "HEAD", "POST", "OPTIONS")
OTHER = "other methods"

#: A path parameter in a rule string: (converter, name).
PARAM = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")


@dataclass(frozen=True)
class Target:
    """One route (a rule string) and one method of it, or all the methods it refuses."""

    pattern: str
    method: str
    allowed: tuple[str, ...]
    endpoint: str | None
    #: (converter, name) of each path parameter.
    params: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return f"{self.method} {self.pattern}"


def _targets() -> list[Target]:
    # Rules do not depend on the configuration or the database: any app lists them all.
    app = create_app(base_config("sqlite://"), environ={}, migrations=False)
    rules: dict[str, list[Any]] = defaultdict(list)
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":  # Flask's file serving; see the module docstring
            continue
        rules[rule.rule].append(rule)
    found = []
    for pattern, group in sorted(rules.items()):
        allowed = tuple(sorted(set().union(*(r.methods for r in group))))
        params = tuple((conv or "default", name) for conv, name in PARAM.findall(pattern))
        for method in SWEPT_METHODS:
            rule = next((r for r in group if method in r.methods), None)
            if rule is None:
                continue
            found.append(Target(pattern, method, allowed, rule.endpoint, params))
        if set(PROBED_METHODS) - set(allowed):
            found.append(Target(pattern, OTHER, allowed, None, params))
    with app.app_context():
        db.engine.dispose()
    return found


TARGETS = _targets()
