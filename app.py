"""The WSGI entry point: ``flask --app app run``; in production ``webapp.wsgi:app``
(scripts/serve)."""

import click

from webapp import create_app
from webapp.settings import ConfigError

try:
    app = create_app()
except ConfigError as exc:
    if click.get_current_context(silent=True) is None:
        raise
    # Under the flask command: one line naming the setting ("Error: AUTH_URL is …"), exit 1.
    raise click.ClickException(str(exc)) from None
