"""Second-factor codes under concurrency, on PostgreSQL behind a real server.

The app runs in the production server (four worker processes of five threads, one
PostgreSQL database),
and twenty browsers (``requests`` sessions, each with its own cookie jar) each get a
pending sign-in of the same person through a real sign-in (the demo credentials), then
submit a code at the same moment. A code is spent by one conditional UPDATE
(``last_used_step < step``, ``used_at IS NULL``), so exactly one of them signs in; wrong
codes are counted before they are checked, so exactly the limit of them is looked at.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from flask import Flask

from webapp import create_app
from webapp.storage.db import db
from webapp.storage.models import RateLimitCounter, RecoveryCode, Session, TotpAuthenticator, User

from .support.config import base_config
from .support.rows import row_count
from .support.second_factor import RECOVERY_CODE_PATTERN, TOTP_KEY_PATTERN, totp_code
from .support.servers import Server, run_server

pytestmark = pytest.mark.e2e

RACERS = 20
ANN = "ann@example.com"
PENDING_COOKIE = "auth.second-factor"
SESSION_COOKIE = "auth.session-token"


@dataclass
class Served:
    """The app in the production server, and the same database seen from this process."""

    server: Server
    app: Flask

    def url(self, path: str) -> str:
        return self.server.url + path


@pytest.fixture
def served_factory(postgres_url: str, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """``served_factory(**settings)``: the production server on the PostgreSQL database
    (development, so the demo credentials sign in), with ``settings`` on top."""
    stack: list[Any] = []
    apps: list[Flask] = []

    def start(**settings: str) -> Served:
        context = run_server(
            tmp_path,
            database=postgres_url,
            APP_ENV="development",
            WEB_CONCURRENCY="4",
            WEB_THREADS="5",
            DB_POOL_SIZE="5",
            **settings,
        )
        server = context.__enter__()
        stack.append(context)
        app = create_app(base_config(postgres_url, AUTH_URL=server.url + "/auth"), environ={})
        apps.append(app)
        return Served(server, app)

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)
    for app in apps:
        with app.app_context():
            db.engine.dispose()


class Racer:
    """One browser: its own cookie jar, talking to the served app over HTTP."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.http = requests.Session()

    def csrf(self) -> str:
        answer = self.http.get(self.served.url("/auth/csrf"), timeout=10)
        return str(answer.json()["csrfToken"])

    def sign_in(self, email: str = ANN) -> requests.Response:
        form = {"csrfToken": self.csrf(), "email": email, "password": "demo"}
        return self.http.post(
            self.served.url("/auth/callback/demo"), data=form, allow_redirects=False, timeout=10
        )

    def hold(self, email: str = ANN) -> None:
        """Pass the first factor: the sign-in waits for the second, in this browser."""
        answer = self.sign_in(email)
        assert answer.status_code == 302, answer.status_code
        assert answer.headers["Location"] == self.served.url("/auth/second-factor")
        assert self.http.cookies.get(PENDING_COOKIE) is not None
        assert self.http.cookies.get(SESSION_COOKIE) is None

    def submit(self, code: str, token: str) -> requests.Response:
        return self.http.post(
            self.served.url("/auth/second-factor"),
            data={"csrfToken": token, "code": code},
            allow_redirects=False,
            timeout=30,
        )

    def session_email(self) -> str | None:
        body = self.http.get(self.served.url("/auth/session"), timeout=10).json()
        return body["user"]["email"] if body else None


def enrol(served: Served) -> tuple[str, list[str], int]:
    """Ann signs in and turns the app on through the account pages over HTTP, then signs
    out; return the key, the recovery codes and the time step the enrolment used."""
    import re

    racer = Racer(served)
    assert racer.sign_in().headers["Location"] == served.url("/")
    page = racer.http.get(served.url("/account/two-factor"), timeout=10)
    found = re.search(TOTP_KEY_PATTERN, page.text)
    assert found, page.text
    key = found[1].replace(" ", "")
    moment = time.time()
    done = racer.http.post(
        served.url("/account/two-factor"),
        data={"csrfToken": racer.csrf(), "code": totp_code(key, moment)},
        timeout=10,
    )
    assert done.status_code == 200, done.status_code
    codes = re.findall(RECOVERY_CODE_PATTERN, done.text)
    assert len(codes) == 10
    racer.http.post(served.url("/auth/signout"), data={"csrfToken": racer.csrf()}, timeout=10)
    with served.app.app_context():
        step = db.session.scalars(sa.select(TotpAuthenticator.last_used_step)).one()
    assert step == int(moment) // 30
    return key, codes, step


def race(racers: list[Racer], code: Callable[[int], str]) -> list[requests.Response]:
    """Every racer submits its code at the same moment; return the answers in order."""
    tokens = [r.csrf() for r in racers]
    start = threading.Barrier(len(racers))
    answers: list[Any] = [None] * len(racers)

    def run(n: int) -> None:
        start.wait()
        answers[n] = racers[n].submit(code(n), tokens[n])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(racers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def held_racers(served: Served) -> list[Racer]:
    racers = [Racer(served) for _ in range(RACERS)]
    for racer in racers:
        racer.hold()
    return racers


def ann_id(served: Served) -> int:
    with served.app.app_context():
        return int(db.session.scalars(sa.select(User.id).where(User.email == ANN)).one())


def outcomes(served: Served, answers: list[requests.Response]) -> tuple[int, int]:
    """(signed in, refused as a wrong code); every answer is one of the two."""
    home = served.url("/")
    signed_in = sum(a.status_code == 302 and a.headers["Location"] == home for a in answers)
    wrong = sum(a.status_code == 400 for a in answers)
    assert signed_in + wrong == len(answers), [(a.status_code, a.headers) for a in answers]
    return signed_in, wrong


# Limits above the burst: every submission reaches the code check.
ROOMY = {"AUTH_SECOND_FACTOR_LIMIT": "100/15m", "AUTH_SECOND_FACTOR_IP_LIMIT": "100/15m"}


def test_twenty_concurrent_submissions_of_one_recovery_code_make_one_session(
    served_factory: Callable[..., Served],
) -> None:
    served = served_factory(**ROOMY)
    _, codes, _ = enrol(served)
    racers = held_racers(served)
    answers = race(racers, lambda n: codes[0])
    assert outcomes(served, answers) == (1, RACERS - 1)
    user_id = ann_id(served)
    assert row_count(served.app, Session, user_id=user_id) == 1
    assert sum(r.session_email() == ANN for r in racers) == 1
    with served.app.app_context():
        used = db.session.scalars(
            sa.select(RecoveryCode.used_at).where(RecoveryCode.used_at.is_not(None))
        ).all()
        amr = db.session.scalars(sa.select(Session.amr)).one()
    assert len(used) == 1 and amr == "pwd rec mfa"


def test_twenty_concurrent_submissions_of_one_app_code_make_one_session(
    served_factory: Callable[..., Served],
) -> None:
    served = served_factory(**ROOMY)
    key, _, step = enrol(served)
    racers = held_racers(served)
    # The step after the enrolment's: within the skew for the next minute, and unused.
    code = totp_code(key, (step + 1) * 30)
    answers = race(racers, lambda n: code)
    assert outcomes(served, answers) == (1, RACERS - 1)
    assert row_count(served.app, Session, user_id=ann_id(served)) == 1
    assert sum(r.session_email() == ANN for r in racers) == 1
    with served.app.app_context():
        last = db.session.scalars(sa.select(TotpAuthenticator.last_used_step)).one()
        amr = db.session.scalars(sa.select(Session.amr)).one()
    assert last == step + 1 and amr == "pwd otp mfa"


def test_copies_of_one_pending_sign_in_with_a_valid_code_each_make_one_session(
    served_factory: Callable[..., Served],
) -> None:
    """One pending sign-in copied into eleven browsers, each submitting another valid code
    at the same moment (the app's next step and the ten recovery codes: the replay rules
    let each through): the pending sign-in passes once, on whichever worker."""
    served = served_factory(**ROOMY)
    key, codes, step = enrol(served)
    holder = Racer(served)
    holder.hold()
    [pending] = [c for c in holder.http.cookies if c.name == PENDING_COOKIE]
    valid = [totp_code(key, (step + 1) * 30), *codes]
    racers = [Racer(served) for _ in valid]
    for racer in racers:
        racer.http.cookies.set_cookie(copy.copy(pending))
    answers = race(racers, lambda n: valid[n])
    places = [a.headers.get("Location") for a in answers]
    expired = served.url("/auth/error?error=SecondFactorExpired")
    assert (places.count(served.url("/")), places.count(expired)) == (1, len(valid) - 1)
    user_id = ann_id(served)
    assert row_count(served.app, Session, user_id=user_id) == 1
    assert sum(r.session_email() == ANN for r in racers) == 1
    # Only the winner's code was spent.
    with served.app.app_context():
        last = db.session.scalars(sa.select(TotpAuthenticator.last_used_step)).one()
    unused = row_count(served.app, RecoveryCode, user_id=user_id, used_at=None)
    assert unused == (10 if last == step + 1 else 9)


def test_twenty_concurrent_wrong_codes_get_five_looks(
    served_factory: Callable[..., Served],
) -> None:
    served = served_factory()  # the default limits: 5 per user, 20 per address
    key, _, step = enrol(served)
    racers = held_racers(served)
    near = {totp_code(key, (step + k) * 30) for k in range(-1, 4)}
    wrong = next(c for c in ("000000", "111111", "222222") if c not in near)
    answers = race(racers, lambda n: wrong)
    throttled = served.url("/auth/error?error=SecondFactorThrottled")
    looked_at = [a for a in answers if a.status_code == 400]
    refused = [a for a in answers if a.status_code == 302 and a.headers["Location"] == throttled]
    assert (len(looked_at), len(refused)) == (5, RACERS - 5)
    # Every attempt was counted for the user; the address only for those looked at.
    with served.app.app_context():
        counts = dict(
            db.session.execute(sa.select(RateLimitCounter.key, RateLimitCounter.count)).all()
        )
    assert counts[f"second-factor-user:{ann_id(served)}"] == RACERS
    assert counts["second-factor-ip:127.0.0.1"] == 5
    # The refused browsers lost their pending sign-in; none is signed in.
    assert sum(r.http.cookies.get(PENDING_COOKIE) is None for r in racers) == RACERS - 5
    assert row_count(served.app, Session) == 0
