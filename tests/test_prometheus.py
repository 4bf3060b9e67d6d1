"""A real Prometheus (Debian's ``prometheus``) scrapes ``GET /metrics`` of the production
server (deploy/serve.py, two worker processes) with its bearer token, and reads back
through its HTTP query API exactly the sign-ins made over HTTP: with a password (the
credentials provider of tests/support/cluster_app.py), by e-mail link (an SMTP server on
loopback) and through the OpenID Provider of tests/op. The counts are the sums over both
workers (prometheus-client's multiprocess mode), and each worker is shown to have
answered some of the requests counted.

Prometheus is installed with apt-get when it is missing and this runs as root (scripts/test
installs it); otherwise the test is skipped, except under CI=true, where that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import sqlalchemy as sa
from prometheus_client.mmap_dict import MmapedDict

from .support.cluster import PASSWORD, Browser
from .support.config import missing_service
from .support.mail import Mailbox, link_of
from .support.oauth import NodeOP, follow_to_app, write_providers_toml
from .support.servers import Server, free_port, run_server, stop_process

pytestmark = pytest.mark.e2e

TOKEN = "scrape-" + "p" * 40
#: The OpenID Provider's client for this test's server (registered once its port is known).
OP_CLIENT = "metrics-op"
WORKERS = 2


def prometheus_binary() -> str:
    """Debian's prometheus, installed if it is missing and this runs as root."""
    found = shutil.which("prometheus")
    if found is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"],
        ):
            subprocess.run(command, env=env, capture_output=True, timeout=600, check=False)
        found = shutil.which("prometheus")
    if found is None:
        missing_service("prometheus is missing: apt-get install -y prometheus (scripts/test does)")
    return found


class Prometheus:
    """Prometheus on a loopback port, scraping ``target`` every second with the token."""

    def __init__(self, binary: str, folder: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {
                            "job_name": "webapp",
                            "scrape_interval": "1s",
                            "scrape_timeout": "1s",
                            "metrics_path": "/metrics",
                            "authorization": {"type": "Bearer", "credentials": TOKEN},
                            "static_configs": [{"targets": [target]}],
                        }
                    ],
                }
            )
        )
        self.log = folder / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> None:
        for _ in range(100):
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        raise AssertionError("prometheus did not get ready: " + self.log.read_text()[-3000:])

    def query(self, expression: str) -> float | None:
        """The value of an instant query (a single number), or None when it has no result."""
        answer = requests.get(
            f"{self.url}/api/v1/query", params={"query": expression}, timeout=5
        ).json()
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expression: str, expected: float, within: float = 15) -> None:
        """Wait until Prometheus has scraped ``expected`` as the value of ``expression``."""
        deadline = time.monotonic() + within
        found = None
        while time.monotonic() < deadline:
            found = self.query(expression)
            if found == expected:
                return
            time.sleep(0.25)
        raise AssertionError(f"{expression}: {found}, not {expected}")

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture
def served(
    tmp_path: Path, node_op: NodeOP, mailbox: Mailbox
) -> Iterator[tuple[Server, Prometheus, Path]]:
    """The production server with two workers and the metrics on (their directory under
    the test's own TMPDIR), and Prometheus scraping it."""
    binary = prometheus_binary()
    providers = write_providers_toml(
        tmp_path / "auth.toml",
        [
            {"id": "password", "type": "credentials", "name": "Password"},
            node_op.provider_config(OP_CLIENT, method="client_secret_basic"),
        ],
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    (tmp_path / "server").mkdir()
    (tmp_path / "prometheus").mkdir()
    with run_server(
        tmp_path / "server",
        WSGI_APP="tests.support.cluster_app:app",
        AUTH_TEST_PASSWORD=PASSWORD,
        AUTH_CONFIG=str(providers),
        EMAIL_SERVER=mailbox.url(),
        AUTH_METRICS_TOKEN=TOKEN,
        WEB_CONCURRENCY=str(WORKERS),
        TMPDIR=str(temporary),
    ) as server:
        node_op.add_client(OP_CLIENT, auth_url=server.url + "/auth", backchannel_logout=False)
        prometheus = Prometheus(binary, tmp_path / "prometheus", f"127.0.0.1:{server.port}")
        try:
            prometheus.wait_ready()
            yield server, prometheus, temporary
        finally:
            prometheus.stop()


class Person:
    """A browser on the server, counting the ``GET /auth/csrf`` requests it makes."""

    csrf_requests = 0

    def __init__(self, server: Server) -> None:
        self.server = server
        self.browser = Browser()

    def post(self, path: str, form: dict[str, str]) -> Any:
        Person.csrf_requests += 1
        return self.browser.post(self.server.url, path, form)

    def password(self, email: str, password: str = PASSWORD) -> str | None:
        """Sign in with the credentials provider; return the error code, if any."""
        answer = self.post("/auth/callback/password", {"email": email, "password": password})
        assert answer.status_code == 302, answer.status_code
        return _error(answer.headers["Location"])

    def email_link(self, mailbox: Mailbox, email: str) -> None:
        assert self.post("/auth/signin/email", {"email": email}).status_code == 302
        link = link_of(mailbox.last())
        form = self.browser.open_link(self.server.url, link)
        answer = self.browser.confirm(self.server.url, link, form)
        assert answer.status_code == 302 and _error(answer.headers["Location"]) is None

    def provider(self, account: str) -> None:
        start = self.post(f"/auth/signin/{OP_CLIENT}?login_hint={account}", {})
        assert start.status_code == 302, start.status_code
        with requests.Session() as at_provider:
            back = follow_to_app(at_provider, start.headers["Location"], origin=self.server.url)
        answer = self.browser.http.get(back, allow_redirects=False, timeout=30)
        assert answer.status_code == 302 and _error(answer.headers["Location"]) is None

    def sign_out(self) -> None:
        assert self.post("/auth/signout", {}).status_code == 302


def _error(location: str) -> str | None:
    return (parse_qs(urlsplit(location).query).get("error") or [None])[0]


def test_prometheus_reads_the_sign_ins_summed_over_the_workers(
    served: tuple[Server, Prometheus, Path], mailbox: Mailbox
) -> None:
    server, prometheus, temporary = served
    # The GETs of csrf so far: run_server's, waiting for the server to answer.
    Person.csrf_requests = int(sum(_requests_by_worker(temporary, "/auth/csrf").values()))
    ann, bob, cat, dan, eve = (Person(server) for _ in range(5))
    assert ann.password("ann@example.com") is None
    assert bob.password("bob@example.com") is None
    assert cat.password("cat@example.com", "not the password") == "CredentialsSignin"
    cat.email_link(mailbox, "cat@example.com")
    dan.email_link(mailbox, "dan@example.com")
    eve.provider("alice")
    ann.sign_out()
    # More new connections, until each worker has answered some (the kernel spreads them).
    while len([n for n in _requests_by_worker(temporary).values() if n]) < WORKERS:
        Person(server).browser.csrf(server.url)
        Person.csrf_requests += 1
        assert Person.csrf_requests < 500, _requests_by_worker(temporary)

    prometheus.wait_for('up{job="webapp"}', 1)
    signins = 'sum(auth_signins_total{{provider="{}",method="{}",outcome="{}"}})'
    prometheus.wait_for(signins.format("password", "credentials", "success"), 2)
    prometheus.wait_for(signins.format("password", "credentials", "failure"), 1)
    prometheus.wait_for(signins.format("email", "email", "success"), 2)
    prometheus.wait_for(signins.format(OP_CLIENT, "oidc", "success"), 1)
    prometheus.wait_for('sum(auth_signins_total{outcome="failure"})', 1)
    prometheus.wait_for("sum(auth_sessions_created_total)", 5)
    prometheus.wait_for('sum(auth_sessions_ended_total{reason="signout"})', 1)
    prometheus.wait_for('sum(auth_emails_total{message="signin",outcome="sent"})', 2)
    prometheus.wait_for("sum(auth_email_send_duration_seconds_count)", 2)
    for endpoint in ("token", "userinfo"):
        call = f'provider="{OP_CLIENT}",endpoint="{endpoint}",outcome="ok"'
        prometheus.wait_for(f"sum(auth_provider_requests_total{{{call}}})", 1)
    discovered = prometheus.query(
        f'sum(auth_provider_requests_total{{provider="{OP_CLIENT}",endpoint="discovery"}})'
    )
    assert discovered in (1, 2)  # once per worker that needed it
    # Every GET csrf made, whichever worker answered it.
    csrf = 'sum(auth_http_requests_total{route="/auth/csrf",method="GET",status="200"})'
    prometheus.wait_for(csrf, Person.csrf_requests)
    assert sum(_requests_by_worker(temporary, "/auth/csrf").values()) == Person.csrf_requests
    # Both workers' pools, each of SQLAlchemy's default size on SQLite.
    single = sa.create_engine(f"sqlite:///{temporary / 'x.sqlite3'}").pool.size()  # type: ignore[attr-defined]
    prometheus.wait_for("sum(auth_db_pool_size)", WORKERS * single)


def _requests_by_worker(temporary: Path, route: str | None = None) -> dict[str, float]:
    """Requests each worker counted (``route``'s, or all), read from its own file in the
    server's metrics directory (made under the TMPDIR the test gave it)."""
    counted: dict[str, float] = {}
    for path in temporary.glob("webapp-metrics-*/counter_*.db"):
        total = 0.0
        for key, value, _timestamp, _position in MmapedDict.read_all_values_from_file(str(path)):
            name, sample, labels, *_ = json.loads(key)
            if sample == "auth_http_requests_total" and route in (None, labels.get("route")):
                total += value
        counted[path.stem] = total
    return counted
