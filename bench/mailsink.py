"""An SMTP server for the benchmark: accepts every message and keeps its sign-in link.

The app in production mode delivers over SMTP (``EMAIL_SERVER``); this sink stands in for
the mail server and the recipient's inbox. Each message's first ``/callback/`` link is
written to ``<folder>/<recipient>`` (replacing the previous one), where the flow driver
(``bench/flow.py``) picks it up. It logs nothing per message, so it costs little next to
the app it serves.

    python -m bench.mailsink --port 2526 --folder /tmp/bench-mail
"""

from __future__ import annotations

import argparse
import re
import signal
import threading
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

LINK_RE = re.compile(r"https?://[^\s\"'<>]+/callback/[^\s\"'<>]+")


class LinkKeeper:
    """aiosmtpd handler: store each message's sign-in link under its recipient's name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        body = message.get_body(preferencelist=("plain", "html"))
        text = body.get_content() if body is not None else ""
        match = LINK_RE.search(text)
        if match:
            for rcpt in envelope.rcpt_tos:
                (self.folder / rcpt.lower()).write_text(match.group(0))
        return "250 OK"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mailsink", description=__doc__)
    parser.add_argument("--port", type=int, default=2526)
    parser.add_argument("--folder", type=Path, required=True)
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    # A fixed server name: the default, socket.getfqdn(), is a DNS lookup per connection.
    controller = Controller(
        LinkKeeper(args.folder), hostname="127.0.0.1", port=args.port, server_hostname="sink"
    )
    controller.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
