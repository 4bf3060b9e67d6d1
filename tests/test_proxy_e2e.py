"""The documented nginx set-up, for real: nginx in front of the production server, attacked
with headers.

nginx runs the documentation's own snippet (read from docs/how-to/deploy.md, "Behind a
proxy", with only addresses, names and paths replaced), so the documentation cannot drift
from what is tested. Through it, forged
``Host``, ``X-Forwarded-Host`` and ``X-Forwarded-For`` headers change no link and no
throttle, and the proxy's access log never holds an e-mail link's token.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from .support.config import IN_CI
from .support.mail import Mailbox, link_of
from .support.servers import free_port, run_server, wait_until_listening

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
#: The page whose nginx snippet is run.
DEPLOY_GUIDE = ROOT / "docs" / "how-to" / "deploy.md"
SITE = "app.example"


def _nginx_conf(folder: Path, *, listen: int, upstream: int) -> Path:
    snippet = re.search(r"```[^\n]*\.nginx\b[^\n]*\n(.*?)```", DEPLOY_GUIDE.read_text(), re.S)
    assert snippet, "docs/how-to/deploy.md has no nginx snippet"
    block = snippet[1]
    for old, new in [
        ("listen 443 ssl;", f"listen 127.0.0.1:{listen};"),
        ("127.0.0.1:8000", f"127.0.0.1:{upstream}"),
        ("/var/log/nginx/webapp.log", str(folder / "access.log")),
        ("example.com", SITE),
    ]:
        assert old in block, old
        block = block.replace(old, new)
    # No certificate here: plain HTTP on loopback, so $scheme is http.
    block = re.sub(r"\n\s*ssl_certificate\S* [^\n]*;", "", block)
    conf = folder / "nginx.conf"
    conf.write_text(
        f"worker_processes 1; pid {folder}/nginx.pid; error_log {folder}/error.log;\n"
        f"events {{}}\nhttp {{\nclient_body_temp_path {folder};\nproxy_temp_path {folder};\n"
        f"{block}\n}}\n"
    )
    return conf


@pytest.fixture
def proxied_site(tmp_path: Path, mailbox: Mailbox) -> Iterator[tuple[str, Path]]:
    """The production server behind nginx; yields nginx's URL and its log."""
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx is None:
        message = "nginx is missing: apt-get install -y nginx-light (scripts/test does)"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    settings = {
        "AUTH_URL": f"http://{SITE}/auth",
        "AUTH_TRUSTED_PROXIES": "127.0.0.1",
        "EMAIL_SERVER": mailbox.url(),
        "EMAIL_IP_LIMIT": "3/10m",
        "EMAIL_ADDRESS_LIMIT": "100/10m",
    }
    with run_server(tmp_path, **settings) as server:
        proxy_port = free_port()
        conf = _nginx_conf(tmp_path, listen=proxy_port, upstream=server.port)
        proxy = subprocess.Popen(
            [nginx, "-c", str(conf), "-p", str(tmp_path), "-g", "daemon off;"],
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_listening(f"http://127.0.0.1:{proxy_port}/auth/csrf", proxy)
            yield f"http://127.0.0.1:{proxy_port}", tmp_path / "access.log"
        finally:
            proxy.terminate()
            proxy.wait(timeout=30)


def test_through_nginx_forged_headers_change_no_link_and_no_throttle(
    proxied_site: tuple[str, Path], mailbox: Mailbox
) -> None:
    base, access_log = proxied_site
    browser = requests.Session()
    hostile = {
        "Host": "evil.example",
        "X-Forwarded-Host": "evil.example",
        "X-Forwarded-Proto": "https",
        "Forwarded": "host=evil.example",
    }
    providers = browser.get(f"{base}/auth/providers", headers=hostile, timeout=10).json()
    assert providers["email"]["signinUrl"] == f"http://{SITE}/auth/signin/email"

    token = browser.get(f"{base}/auth/csrf", timeout=10).json()["csrfToken"]
    # Not the forged Host here: requests would then not send the CSRF cookie it holds for
    # 127.0.0.1 (a browser never sends a forged Host; an attacker's curl has its own cookies).
    forged = {k: v for k, v in hostile.items() if k != "Host"}
    for n in range(6):
        answer = browser.post(
            f"{base}/auth/signin/email",
            allow_redirects=False,
            timeout=10,
            data={"csrfToken": token, "email": f"u{n}@example.com"},
            headers={**forged, "X-Forwarded-For": f"198.51.100.{n}"},
        )
        assert answer.status_code == 302
        assert answer.headers["Location"].startswith(f"http://{SITE}/auth/verify-request")
    # nginx replaced each forged X-Forwarded-For with the address it saw: one client.
    assert len(mailbox.messages) == 3
    link = link_of(mailbox.messages[0])
    assert link.startswith(f"http://{SITE}/auth/callback/email?")
    assert "evil.example" not in mailbox.messages[0].as_string()

    parts = urlsplit(link)
    page = browser.get(f"{base}{parts.path}?{parts.query}", timeout=10)
    assert page.status_code == 200
    secret = re.search(r"token=([^&]+)", parts.query)[1]  # type: ignore[index]
    for _ in range(50):  # nginx writes the line once the response is sent
        if "/callback/email" in access_log.read_text():
            break
        time.sleep(0.1)
    logged = access_log.read_text()
    assert "/auth/callback/email?[redacted]" in logged
    assert secret not in logged
