"""The TV of the device sign-in browser tests: a second live server on the live server's
database, whose providers are device flow clients of the live server's OpenID Provider."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask

from webapp import create_app
from webapp.storage.db import db
from webapp.storage.models import DeviceRequest

from .browser import LiveServer, served
from .config import base_config
from .oauth import DEVICE_GRANT, write_providers_toml

#: The TV's providers: app provider id (= client id at the OP) -> (name, interval, lifetime
#: of its device codes in seconds).
TV_PROVIDERS = {
    "op-tv": ("Acme TV", 1, 600),
    "op-tv-slow": ("Slow TV", 10, 600),
    "op-tv-short": ("Short TV", 1, 3),
}


class TV:
    def __init__(self, url: str, app: Any, op: Any) -> None:
        self.url = url
        self.app = app
        self.op = op

    def due(self, user_code: str) -> None:
        """Make the request's next poll due now (stands in for waiting out its interval)."""
        with self.app.app_context():
            db.session.execute(
                sa.update(DeviceRequest)
                .where(DeviceRequest.user_code == user_code)
                .values(next_poll_at=datetime.now(UTC) - timedelta(milliseconds=1))
            )
            db.session.commit()


@contextmanager
def serving_tv(live_server: LiveServer, database_url: str, config_dir: Path) -> Iterator[TV]:
    """The TV app on its own loopback port, sharing the live server's database (whose
    tables the live server's fixture empties after each test) and provider."""
    op = live_server.op
    assert op is not None

    def build(origin: str) -> Flask:
        entries = []
        for client_id, (name, interval, lifetime) in TV_PROVIDERS.items():
            # Device clients of the OP, with this origin's post_logout_redirect_uri.
            op.add_client(
                client_id,
                auth_url=origin + "/auth",
                backchannel_logout=False,
                device_interval=interval,
                device_code_ttl=lifetime,
                grant_types=[DEVICE_GRANT, "refresh_token"],
                response_types=[],
                redirect_uris=None,
            )
            entries.append(
                op.provider_config(client_id, name=name, device_flow=True, logout="rp-initiated")
            )
        config = write_providers_toml(config_dir / "providers.toml", entries)
        return create_app(
            base_config(database_url, AUTH_URL=f"{origin}/auth", AUTH_CONFIG=str(config)),
            environ={},
        )

    with served(build) as (origin, app):
        yield TV(origin, app, op)
