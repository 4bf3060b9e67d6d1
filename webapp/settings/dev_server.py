"""Where ``flask run`` serves the app, read from its own options.

In development without AUTH_URL the site's address is taken from it, so links name the
port the browser reaches; the settings only receive the answer (``load_settings(served=)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_address

import click


@dataclass(frozen=True)
class DevServer:
    """Where ``flask run`` serves the app: what its options (``--host``/``-h``,
    ``--port``/``-p``, ``--cert``) or ``FLASK_RUN_HOST``/``FLASK_RUN_PORT`` said."""

    host: str
    port: int
    https: bool = False

    @property
    def public_host(self) -> str:
        """The host name links name: ``localhost`` for a loopback or wildcard address
        (``127.0.0.1``, ``::1``, ``0.0.0.0``), else the address or name it binds."""
        name = self.host.strip().strip("[]").lower()
        try:
            address = ip_address(name)
        except ValueError:
            return name or "localhost"
        if address.is_loopback or address.is_unspecified:
            return "localhost"
        return f"[{name}]" if address.version == 6 else name

    def url(self, path: str = "/auth") -> str:
        scheme = "https" if self.https else "http"
        return f"{scheme}://{self.public_host}:{self.port}{path}"


def dev_server() -> DevServer | None:
    """Return where ``flask run`` will serve, when the app is being loaded by it.

    ``flask run`` loads the app (``create_app``) after click has read its options, so the
    port is known whichever way it was given; under another server (granian, a test
    client) there is no such command and this returns None.
    """
    from flask.cli import run_command

    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.command is not run_command:
        return None
    return DevServer(
        host=str(ctx.params.get("host") or "127.0.0.1"),
        port=int(ctx.params.get("port") or 0),
        https=ctx.params.get("cert") is not None,
    )


def loaded_by_a_command() -> bool:
    """Whether a ``flask`` command other than ``run`` is loading the app (``flask auth
    cleanup``, ``flask shell``): it serves nothing, so the start-up lines about serving
    are left out."""
    from flask.cli import run_command

    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.command is not run_command
