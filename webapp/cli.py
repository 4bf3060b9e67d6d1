"""Operator commands: ``flask auth cleanup | sessions | events | revoke | revoke-tokens |
rotate-secrets | device-login | mfa reset | sso list | sso undo | migrate``, and
``flask auth --version``."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from flask import current_app, g
from flask.cli import AppGroup
from flask.ctx import RequestContext
from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.exc import OperationalError

from webapp.audit import throttles, trail
from webapp.browser_state import cookies
from webapp.core import urls
from webapp.core.clock import iso_utc, utcnow
from webapp.errors import AuthError
from webapp.flows.account import two_factor
from webapp.flows.provider_tokens import revoke_tokens
from webapp.flows.signin.device import (
    DeviceCodeExpired,
    DeviceFlowOff,
    request_device_code,
    wait_for_approval,
)
from webapp.flows.signin.oauth import sign_in_with_token
from webapp.flows.signin.second_factor import WrongCode, pass_with_code
from webapp.flows.sso import joins
from webapp.mail.email_addresses import InvalidAddress, normalize_email
from webapp.second_factor import pending_signin, verification
from webapp.sessions.store import AuthSession, delete_expired
from webapp.settings import ConfigError, current_settings
from webapp.storage import transactions
from webapp.storage.database import execute_counting
from webapp.storage.db import db
from webapp.storage.models import (
    Account,
    Authenticator,
    AuthEvent,
    DeviceRequest,
    Session,
    SpentChallenge,
    SpentSamlAssertion,
    UsedLogoutToken,
    User,
    VerificationToken,
)
from webapp.storage.resealing import reseal
from webapp.telemetry import logsafe
from webapp.ui.qr import print_qr

#: pyproject.toml's ``[project] name``: the distribution whose version ``--version`` prints.
DISTRIBUTION = "webapp-signin"


# An eager option: it prints and exits before any command asks for the app, so it needs no
# settings (pyproject.toml registers this group as a ``flask.commands`` entry point, so that
# ``flask auth`` is found without loading the app either).
class _Commands(AppGroup):
    """``flask auth``'s commands, where a database that cannot be reached is one line
    naming it and a non-zero status, not a driver's traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OperationalError as exc:
            # The driver's first line names the host and port, never the password.
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
            raise click.ClickException(
                f"the database (DATABASE_URL) cannot be reached: {logsafe.encode(reason)}"
            ) from None


auth_cli = click.version_option(
    package_name=DISTRIBUTION, prog_name=DISTRIBUTION, message="%(prog)s %(version)s"
)(_Commands("auth", help="Inspect and clean up sign-in data."))


@auth_cli.command("cleanup")
@click.option("--batch-size", default=5000, show_default=True, help="Rows deleted per transaction.")
def cleanup(batch_size: int) -> None:
    """Delete expired sessions, verification tokens, device sign-ins, remembered logout
    tokens, passkey challenges and SAML assertions, finished rate-limit windows, and audit
    events older than AUDIT_RETENTION."""
    sessions = delete_expired(batch_size=batch_size)
    now = utcnow()
    tokens = execute_counting(delete(VerificationToken).where(VerificationToken.expires <= now))
    devices = execute_counting(delete(DeviceRequest).where(DeviceRequest.expires <= now))
    logouts = execute_counting(delete(UsedLogoutToken).where(UsedLogoutToken.expires <= now))
    challenges = execute_counting(delete(SpentChallenge).where(SpentChallenge.expires <= now))
    assertions = execute_counting(
        delete(SpentSamlAssertion).where(SpentSamlAssertion.expires <= now)
    )
    transactions.commit()
    counters = throttles.delete_finished_windows()
    retention = current_settings().audit_retention
    events = trail.delete_older_than(retention, batch_size=batch_size)
    click.echo(f"deleted {sessions} expired session(s)")
    click.echo(f"deleted {tokens} expired verification token(s)")
    click.echo(f"deleted {devices} expired device sign-in(s)")
    click.echo(f"deleted {logouts} remembered logout token(s)")
    click.echo(f"deleted {challenges} spent passkey challenge(s)")
    click.echo(f"deleted {assertions} remembered SAML assertion(s)")
    click.echo(f"deleted {counters} finished rate-limit window(s)")
    click.echo(f"deleted {events} audit event(s) older than {retention.days} days")


@auth_cli.command("sessions")
@click.option("--user", "email", help="Only this user's sessions (e-mail address).")
@click.option("--all", "include_expired", is_flag=True, help="Include expired sessions.")
def list_sessions(email: str | None, include_expired: bool) -> None:
    """List sessions: id, user, created, last active, expires, IP, provider, user agent."""
    query = select(Session, User.email).join(User).order_by(Session.last_active_at.desc())
    if email:
        query = query.where(User.email == _address(email))
    if not include_expired:
        query = query.where(Session.expires > utcnow())
    rows = db.session.execute(query).all()
    if not rows:
        click.echo("no sessions")
        return
    click.echo(
        f"{'id':>6}  {'user':<30} {'created':<20} {'last active':<20} {'expires':<20} "
        f"{'ip':<16} {'provider':<12} user agent"
    )
    for session, user_email in rows:
        # The address and user agent were sent by clients: encoded, so that no control
        # character (an ESC or C1 sequence) reaches the operator's terminal.
        click.echo(
            f"{session.id:>6}  {(user_email or '-'):<30.30} {_when(session.created_at):<20} "
            f"{_when(session.last_active_at):<20} {_when(session.expires):<20} "
            f"{logsafe.encode(session.ip or '-', limit=None):<16} "
            f"{(session.provider or '-'):<12} "
            f"{logsafe.encode((session.user_agent or '-')[:60], limit=None)}"
        )


@auth_cli.command("events")
@click.option("--user", "email", help="Events of this user, or about this address (e-mail).")
@click.option("--since", help="From this UTC date or time (2026-11-01, 2026-11-01T08:00), or "
              "this long ago (30m, 12h, 7d).")  # fmt: skip
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice([e.value for e in trail.Event]),
    help="Only events of this type (repeatable).",
)
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="The latest this many (0: all).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_events(
    email: str | None, since: str | None, types: tuple[str, ...], limit: int, as_json: bool
) -> None:
    """List audit events, oldest first: time, type, outcome, user, provider, IP, device,
    request id, detail."""
    user_ids: list[int] = []
    address = None
    if email:
        address = _address(email)
        user_ids = list(db.session.scalars(select(User.id).where(User.email == address)))
    rows = trail.search(
        user_ids=user_ids,
        subject=address,
        since=_since(since) if since else None,
        types=[trail.Event(t) for t in types],
        limit=limit or None,
    )
    if as_json:
        for event, user_email in rows:
            click.echo(json.dumps(_event_json(event, user_email), ensure_ascii=False))
        return
    if not rows:
        click.echo("no events")
        return
    click.echo(
        f"{'time':<19}  {'type':<17} {'outcome':<24} {'user':<30} {'provider':<12} "
        f"{'ip':<16} {'device':<24} {'request':<32} detail"
    )
    for event, user_email in rows:
        # Address and device come from clients: encoded for the terminal, as in `sessions`.
        outcome = event.outcome + (f" {event.error_code}" if event.error_code else "")
        click.echo(
            f"{_when(event.occurred_at):<19}  {event.type:<17} {outcome:<24} "
            f"{_who(event, user_email):<30.30} {(event.provider or '-'):<12} "
            f"{logsafe.encode(event.ip or '-', limit=None):<16} "
            f"{logsafe.encode(event.device or '-', limit=None):<24.24} "
            f"{(event.request_id or '-'):<32} {_detail(event)}"
        )


@auth_cli.command("revoke")
@click.option("--user", "email", help="Sign this user out everywhere (e-mail address).")
@click.option("--session", "session_id", type=int, help="Delete one session by id.")
def revoke(email: str | None, session_id: int | None) -> None:
    """Delete sessions: all of one user's, or one by id (see `flask auth sessions`)."""
    if (email is None) == (session_id is None):
        raise click.UsageError("give exactly one of --user EMAIL or --session ID")
    users = ""
    if session_id is not None:
        count = _end_sessions(Session.id == session_id)
    else:
        # Every user holding the address: its verified owner and any unverified claimant
        # (an address is identity only once verified, so several users may show it).
        user_ids = list(
            db.session.scalars(select(User.id).where(User.email == _address(str(email))))
        )
        if not user_ids:
            raise click.ClickException(f"no user with e-mail {email}")
        count = _end_sessions(Session.user_id.in_(user_ids))
        users = f" of {len(user_ids)} user(s)"
    transactions.commit()
    if session_id is not None and count == 0:
        raise click.ClickException(f"no session with id {session_id}")
    click.echo(f"revoked {count} session(s){users}")


@auth_cli.command("revoke-tokens")
@click.option("--user", "email", required=True, help="Whose provider tokens (e-mail address).")
@click.option("--provider", "provider_id", help="Only the account at this provider (its id).")
def revoke_provider_tokens(email: str, provider_id: str | None) -> None:
    """Revoke a user's tokens at their providers (RFC 7009) and forget them.

    The accounts stay linked: the person can still sign in through them, which stores new
    tokens. Exits non-zero when a provider did not confirm.
    """
    query = (
        select(Account)
        .join(User)
        .where(User.email == _address(email))
        .where(Account.access_token.is_not(None) | Account.refresh_token.is_not(None))
        .order_by(Account.id)
    )
    if provider_id:
        query = query.where(Account.provider == provider_id)
    accounts = list(db.session.scalars(query))
    lines, confirmed = [], 0
    for account in accounts:
        # Tokens that read as None are values no configured secret opens.
        readable = bool(account.access_token or account.refresh_token)
        revoked = revoke_tokens(account, forget=True) and readable
        confirmed += revoked
        if revoked:
            state = "revoked"
        elif readable:
            state = "NOT confirmed by the provider (see the log)"
        else:
            state = "unreadable (sealed under a secret no longer configured), not revoked"
        lines.append(f"account {account.id} ({account.provider}): {state}; tokens forgotten")
    transactions.commit()
    for line in lines:
        click.echo(line)
    click.echo(f"{confirmed} of {len(accounts)} account(s) revoked at the provider")
    if confirmed < len(accounts):
        raise SystemExit(1)


mfa_cli = AppGroup("mfa", help="Second factors: authenticator apps, recovery codes, passkeys.")
auth_cli.add_command(mfa_cli)


@mfa_cli.command("reset")
@click.option("--user", "email", required=True, help="Whose second factors (e-mail address).")
def mfa_reset(email: str) -> None:
    """Remove a user's authenticator app, recovery codes and passkeys (a lost phone), and
    sign them out everywhere. They sign in again with e-mail or a linked provider.

    The user is the address's verified owner; an address nobody has verified names a
    user only when exactly one user shows it (unverified claims may be anyone's).
    """
    users = list(
        db.session.scalars(select(User).where(User.email == _address(email)).order_by(User.id))
    )
    owners = [u for u in users if u.email_verified is not None] or users
    if not owners:
        raise click.ClickException(f"no user with e-mail {email}")
    if len(owners) > 1:
        ids = ", ".join(str(u.id) for u in owners)
        raise click.ClickException(
            f"{len(owners)} users show {email} and none has verified it (ids {ids}); "
            "nothing was reset"
        )
    lines = []
    for user in owners:
        app = verification.has_second_factor(user.id)
        codes = two_factor.remove_all(user.id)
        if app:
            trail.record(
                trail.Event.SECOND_FACTOR_OFF, user_id=user.id, detail={"by": trail.OPERATOR}
            )
        passkeys = execute_counting(delete(Authenticator).where(Authenticator.user_id == user.id))
        sessions = _end_sessions(Session.user_id == user.id)
        lines.append(
            f"user {user.id}: authenticator app {'removed' if app else 'none'}, "
            f"{codes} recovery code(s), {passkeys} passkey(s) removed; "
            f"{sessions} session(s) signed out"
        )
    transactions.commit()
    for line in lines:
        click.echo(line)


sso_cli = AppGroup("sso", help="Joins of existing users by e-mail domain (providers' domains).")
auth_cli.add_command(sso_cli)


@sso_cli.command("list")
def sso_list() -> None:
    """List the joins: id, when, user, address, provider, and whether undone."""
    listed = joins.list_joins()
    if not listed:
        click.echo("no joins")
    for join in listed:
        undone = f"  undone {_when(join.undone_at)}" if join.undone_at else ""
        click.echo(
            f"{join.id}  {_when(join.joined_at)}  user {join.user_id}  "
            f"{logsafe.encode(join.email)}  {join.provider}{undone}"
        )


@sso_cli.command("undo")
@click.argument("join_id", type=int)
def sso_undo(join_id: int) -> None:
    """Remove the account a join made and the sessions it started (see `flask auth sso
    list`); the join is kept as undone, so it is not made again by itself."""
    try:
        done = joins.undo_join(join_id)
    except joins.JoinNotFound:
        raise click.ClickException(f"no join with id {join_id} that is not undone") from None
    transactions.commit()
    account = "account removed" if done.account_removed else "its account was already gone"
    click.echo(
        f"join {join_id} undone: user {done.join.user_id} at {done.join.provider}, {account}, "
        f"{done.sessions_ended} session(s) signed out"
    )


@auth_cli.command("rotate-secrets")
@click.option("--batch-size", default=500, show_default=True, help="Rows per transaction.")
def rotate_secrets(batch_size: int) -> None:
    """Re-seal stored tokens under AUTH_SECRET, so AUTH_PREVIOUS_SECRETS can be retired.

    Run it with the new secret in AUTH_SECRET and the old ones in AUTH_PREVIOUS_SECRETS;
    when it reports no unreadable rows, the old secrets can go.
    """
    done = reseal(batch_size=batch_size)
    click.echo(f"re-sealed {done.changed} row(s) under the current secret")
    if done.unreadable:
        click.echo(
            f"{done.unreadable} row(s) hold tokens no configured secret opens: add the "
            "secret they were sealed under to AUTH_PREVIOUS_SECRETS and run this again",
            err=True,
        )
        raise SystemExit(1)


@auth_cli.command("device-login")
@click.argument("provider_id")
@click.option("--qr", is_flag=True, help="Also draw the QR code of the approval link.")
@click.option(
    "--print-cookie",
    is_flag=True,
    help="Print the new session's cookie (a secret: for scripts that call the app).",
)
def device_login(provider_id: str, qr: bool, print_cookie: bool) -> None:
    """Sign in through PROVIDER_ID with a code approved elsewhere (RFC 8628).

    Prints the code and where to enter it, waits for the approval, then starts a session
    as a browser sign-in would (same checks, account rules and sign-in hook) and prints
    its id.
    """
    try:
        client, code = request_device_code(provider_id)
    except DeviceFlowOff:
        raise click.ClickException(f"{provider_id} does not offer device sign-in") from None
    except AuthError as exc:
        raise click.ClickException(f"{provider_id} did not answer usably ({exc.code})") from None
    click.echo(f"Go to {code.verification_uri} and enter the code {code.user_code}")
    if code.verification_uri_complete:
        click.echo(f"or open {code.verification_uri_complete}")
        if qr:
            print_qr(code.verification_uri_complete)
    click.echo(f"Waiting for approval (the code expires in {code.expires_in} s)...")
    # A sign-in is a request's work (cookies, the sign-in hook, the commit): run it as one.
    with _sign_in_request():
        try:
            token = wait_for_approval(client, code)
            sign_in_with_token(
                client, token, nonce=None, form={}, callback_url=None, id_token_required=False
            )
        except DeviceCodeExpired:
            raise click.ClickException("the code expired before it was approved") from None
        except AuthError as exc:
            transactions.discard()
            raise click.ClickException(f"sign-in refused: {exc.code}") from None
        session, cookie, held = _signed_in()
    if held is not None:
        # Two-step verification: the second factor, as the browser's second-factor page.
        answer = click.prompt("Code from your authenticator app (or a recovery code)")
        with _sign_in_request({pending_signin.cookie_name(): held}):
            try:
                pass_with_code(answer, client_address=None)
            except (WrongCode, AuthError) as exc:
                transactions.discard()
                why = exc.code if isinstance(exc, AuthError) else "that code is not right"
                raise click.ClickException(f"sign-in refused: {why}") from None
            session, cookie, _ = _signed_in()
    if session is None:
        raise click.ClickException("the sign-in hook sent this sign-in elsewhere")
    click.echo(f"Signed in: session {session.id} of user {session.user.id}")
    if print_cookie and cookie is not None:
        click.echo(f"{cookies.session_cookie_name()}={cookie}")


@auth_cli.command("migrate")
@click.option("--on-start", is_flag=True, help="Only if MIGRATE_ON_START is true (scripts/serve).")
def migrate(on_start: bool) -> None:
    """Upgrade the schema to the newest revision, once however many instances run this at
    the same moment: the others wait, then find nothing to do (a PostgreSQL advisory lock
    on DATABASE_DIRECT_URL, else DATABASE_URL)."""
    if on_start and not current_settings().migrate_on_start:
        return
    # Imported here: Alembic (about 10 MB) is for this command, never for a server's worker.
    from webapp.storage.schema_upgrade import upgrade_once

    try:
        done = upgrade_once()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(done.describe())


def _sign_in_request(with_cookies: dict[str, str] | None = None) -> RequestContext:
    """A request context for a terminal sign-in (from loopback, with ``with_cookies``)."""
    header = "; ".join(f"{name}={value}" for name, value in (with_cookies or {}).items())
    return current_app.test_request_context(
        base_url=urls.base_url(),
        headers={"User-Agent": "flask auth device-login", **({"Cookie": header} if header else {})},
        environ_base={"REMOTE_ADDR": "127.0.0.1"},
    )


def _signed_in() -> tuple[AuthSession | None, str | None, str | None]:
    """Commit the sign-in request's work; return its session, session cookie and, when it
    waits for a second factor, the pending sign-in's cookie."""
    session = g.get("auth_session")
    cookie = cookies.pending(cookies.session_cookie_name())
    held = cookies.pending(pending_signin.cookie_name())
    transactions.commit()
    return session, cookie, held


def _end_sessions(*where: ColumnElement[bool]) -> int:
    """Delete the sessions matching ``where``; record one revocation by the operator per
    user, with its count. Return how many ended."""
    ended = db.session.scalars(delete(Session).where(*where).returning(Session.user_id)).all()
    for user_id, count in Counter(ended).items():
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            detail={"reason": trail.OPERATOR, "sessions": count},
        )
    return len(ended)


_SPAN_RE = re.compile(r"^(\d+)([mhd])$")
_SPAN_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def _since(text: str) -> datetime:
    """``--since``: a span back from now (``7d``) or a UTC date or time (ISO 8601)."""
    span = _SPAN_RE.match(text.strip())
    if span:
        return utcnow() - timedelta(**{_SPAN_UNITS[span[2]]: int(span[1])})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a date or time (2026-11-01T08:00) nor a span (7d)",
            param_hint="--since",
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _who(event: AuthEvent, email: str | None) -> str:
    """Whom an event names: the user's address (or id), else the start of its subject's keyed
    hash (``--json`` gives all of it)."""
    if event.user_id is not None:
        return email or f"user {event.user_id}"
    return f"#{event.subject_hash[:16]}" if event.subject_hash else "-"


def _detail(event: AuthEvent) -> str:
    # A passkey's name is the person's text: encoded too.
    shown = json.dumps(event.detail, ensure_ascii=False) if event.detail else "-"
    return logsafe.encode(shown, limit=None)


def _event_json(event: AuthEvent, email: str | None) -> dict[str, object]:
    return {
        "id": event.id,
        "time": iso_utc(event.occurred_at),
        "type": event.type,
        "outcome": event.outcome,
        "error": event.error_code,
        "userId": event.user_id,
        "userEmail": email,
        "subjectHash": event.subject_hash,
        "provider": event.provider,
        "ip": event.ip,
        "device": event.device,
        "requestId": event.request_id,
        "detail": event.detail,
    }


def _address(email: str) -> str:
    """The address as users.email holds it (the one normal form), or a usage error."""
    try:
        return normalize_email(email)
    except InvalidAddress as exc:
        raise click.BadParameter(f"{email!r} is not an e-mail address: {exc}") from None


def _when(moment: object) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if hasattr(moment, "strftime") else "-"
