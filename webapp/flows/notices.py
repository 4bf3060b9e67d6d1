"""Security notices by e-mail: a sign-in from a new device, a sign-in method added or
removed, the address changed (told at the old one), other sessions signed out, the account
deleted (docs/trail.md).

Each notice has its own switch (``AUTH_NOTICE_*``), goes only to a verified address (an
unverified one may be anyone's, docs/security.md) and is sent through the mailer once what
it tells of is committed (``transactions.on_commit``). A delivery that fails is logged,
without the address, and never fails the action it tells of. No notice holds a link: a
forged one then cannot lead anywhere, and a real one teaches nobody to follow one.

The switches are on by default where start-up finds a way to deliver mail (EMAIL_SERVER,
the development outbox, or the application's own transport set by then); a transport the
application registers later carries the notices that are on, and turns on none that is off.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, current_app
from sqlalchemy import select

from webapp.audit import trail
from webapp.core import urls
from webapp.core.clock import utcnow
from webapp.i18n import format_moment, gettext
from webapp.mail.delivery import DeliveryError, Mailer, mailer_from_settings
from webapp.settings import Settings, current_settings
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import User
from webapp.telemetry import logsafe

log = logging.getLogger(__name__)

_EXTENSION = "webapp.notice_mailer"


def init_app(app: Flask, conf: Settings, *, own_mail_transport: bool) -> None:
    """Build the notices' mailer when any notice is on (the settings made sure one can:
    through EMAIL_SERVER, the development outbox, or the application's own mail transport,
    ``own_mail_transport``, set at start-up)."""
    wanted = (
        conf.notice_new_device,
        conf.notice_methods,
        conf.notice_other_sessions,
        conf.notice_account_deleted,
    )
    app.extensions[_EXTENSION] = (
        mailer_from_settings(conf, own_mail_transport=own_mail_transport) if any(wanted) else None
    )


def after_signin(user_id: int, *, provider: str, new_user: bool) -> None:
    """Tell the user of a sign-in through ``provider`` from a device the trail has not seen
    for them lately.

    Call it before the sign-in is recorded; a new user's first sign-in tells nothing.
    """
    conf = current_settings()
    if not conf.notice_new_device or new_user:
        return
    if trail.is_new_device(user_id, within=conf.new_device_window):
        _queue(_verified_address(user_id), "notice_new_device", method=_name(provider))


def method_changed(user_id: int, *, added: bool, provider: str | None = None) -> None:
    """Tell the user that a way to sign in was added or removed: an account at ``provider``
    (its id), or, with none, a passkey. A passkey's name is not repeated: whoever added it
    chose it, and a notice carries no text a stranger wrote (a mail program would make a
    link of an address in it)."""
    if current_settings().notice_methods:
        method = _name(provider) if provider is not None else None
        _queue(_verified_address(user_id), "notice_method", method=method, added=added)


def others_signed_out(user_id: int, *, count: int) -> None:
    """Tell the user that "sign out everywhere else" ended ``count`` other sessions."""
    if current_settings().notice_other_sessions and count:
        _queue(_verified_address(user_id), "notice_other_sessions", count=count)


def address_changed(user: User) -> None:
    """Tell the address ``user`` has now (if verified) that it is being replaced; call it
    before the new one is written. The new address is not named: whoever changed it chose
    it, and a notice carries no text a stranger wrote."""
    if current_settings().notice_methods and user.email_verified is not None:
        _queue(user.email, "notice_address_changed")


def account_deleted(user: User) -> None:
    """Tell the address ``user`` had (if verified) that the account was deleted; call it
    before the row goes."""
    if current_settings().notice_account_deleted and user.email_verified is not None:
        _queue(user.email, "notice_account_deleted")


def _name(provider_id: str) -> str:
    # Imported here: the providers import the flows, which import this module.
    from webapp.providers import provider_name

    return provider_name(provider_id)


def _verified_address(user_id: int) -> str | None:
    return db.session.execute(
        select(User.email).where(User.id == user_id, User.email_verified.is_not(None))
    ).scalar_one_or_none()


def _queue(address: str | None, template: str, **specific: Any) -> None:
    """Send ``template`` to ``address`` once this request's writes are committed; the
    context is taken now, while the request is at hand, in its language (the message is
    rendered before the request ends, so in that language too). The device is the trail's
    label, in no one's language, as "Recent activity" shows it."""
    if address is None:
        return
    conf = current_settings()
    context = {
        "site": conf.brand.name,
        "host": urls.origin().split("://", 1)[1],
        "color": conf.brand.color,
        "email": address,
        "when": format_moment(utcnow()),
        "device": trail.this_device(),
        # TRANSLATORS: in a security notice, in place of the IP address it came from.
        "ip": trail.this_address() or gettext("unknown"),
        **specific,
    }
    mailer: Mailer | None = current_app.extensions[_EXTENSION]
    if mailer is not None:
        transactions.on_commit(lambda: _deliver(mailer, address, template, context))


def _deliver(mailer: Mailer, address: str, template: str, context: Mapping[str, Any]) -> None:
    try:
        mailer.send(to=address, template=template, context=context)
    except DeliveryError as exc:
        # The reason names the server and its reply, never the address or the message.
        log.warning("security notice %s not delivered: %s", template, logsafe.encode(exc))
    except Exception:
        # What the notice tells of is committed: nothing may turn its answer into an error
        # (a broken template in EMAIL_TEMPLATES, say).
        log.exception("security notice %s not sent", template)
