"""``python -m tests.interop.django_provider`` (from the repository root, with
``DOT_PROVIDER_DIR`` set): migrate the SQLite database, seed it, serve on the configured
loopback port with a threaded wsgiref server, and print ``ready <port>`` once listening.
Requests are logged to stderr only on errors (Django's own logging)."""

from __future__ import annotations

import os
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.interop.django_provider.settings")


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from .seed import seed

    seed(settings.CONFIG)
    from .wsgi import application

    port = int(settings.CONFIG["port"])
    server = make_server(
        "127.0.0.1", port, application, server_class=ThreadingServer, handler_class=QuietHandler
    )
    print(f"ready {port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
