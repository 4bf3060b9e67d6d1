"""The metrics in Prometheus's text format (version 0.0.4), from this process or, under the
production server, from every worker's.

deploy/serve.py makes a fresh, empty directory before it forks the workers and names it in
``PROMETHEUS_MULTIPROC_DIR``; prometheus-client, imported after that, then keeps each
process's values in files of its own there (its multiprocess mode), and a scrape, which
one worker answers, reads them all: counters and histograms summed over every worker that
ever ran (a worker that exits leaves its counts, so a total never goes back), gauges over
the workers alive. A dead worker's gauges are dropped (``mark_process_dead``) when a scrape
finds that its process is gone: granian tells the app nothing when it replaces a worker.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, multiprocess, values

from webapp.metrics.families import REGISTRY

#: What the answer is: the text format Prometheus reads (``0.0.4``).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The variable prometheus-client reads, once, when it is imported.
DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: A worker's gauge file: ``gauge_livesum_<pid>.db``.
_LIVE_GAUGE_FILE = re.compile(r"^gauge_live[a-z]*_(\d+)\.db$")


def multiprocess_directory() -> str | None:
    """The directory the workers' values are kept in, when this process keeps its own
    there (prometheus-client in multiprocess mode); else None."""
    directory = os.environ.get(DIRECTORY_VARIABLE)
    if directory and getattr(values.ValueClass, "_multiprocess", False):
        return directory
    return None


def render() -> bytes:
    """Every metric, in the text format: every worker's, or this process's."""
    directory = multiprocess_directory()
    if directory is None:
        return generate_latest(REGISTRY)
    forget_dead_workers(directory)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def forget_dead_workers(directory: str) -> list[int]:
    """Drop the gauges of the workers whose process is gone (their counters stay); return
    their process ids."""
    dead = set()
    for path in Path(directory).glob("gauge_live*_*.db"):
        found = _LIVE_GAUGE_FILE.match(path.name)
        if found is not None and not _alive(int(found[1])):
            dead.add(int(found[1]))
    for pid in sorted(dead):
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
    return sorted(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process has the id now: not our worker
    return True
