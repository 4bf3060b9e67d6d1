"""What signing in through a provider answers: a redirect or a page (``auth_routes`` makes
the response)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Redirect:
    """Send the browser to ``url``."""

    url: str


@dataclass(frozen=True)
class Page:
    """Render ``template`` with ``context``."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    status: int = 200


Outcome = Redirect | Page
