"""Back-channel logout: the identity provider tells us, server to server, that a person
signed out there (OpenID Connect Back-Channel Logout 1.0); we end their sessions here.

The token is validated (``oauth.logout_token``), its ``jti`` recorded in
``used_logout_tokens`` so that the same token is refused on every worker and instance,
and the sessions it names deleted, all in the request's one transaction: a refusal
changes nothing. Sessions are rows, so the logout is effective on every instance at once.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime

from sqlalchemy import delete, insert
from sqlalchemy.exc import IntegrityError

from webapp.audit import trail
from webapp.core.clock import utcnow
from webapp.core.hooks import provider_signed_out
from webapp.oauth.logout_token import InvalidLogoutToken, validate_logout_token
from webapp.providers import oauth_client
from webapp.sessions.store import end_provider_sessions
from webapp.storage import transactions
from webapp.storage.db import db
from webapp.storage.models import UsedLogoutToken
from webapp.telemetry.logsafe import encode

log = logging.getLogger(__name__)


class BackchannelLogoutOff(Exception):
    """No such provider, or it does not accept back-channel logout."""


def backchannel_logout(provider_id: str, logout_token: str | None) -> int:
    """End the sessions a provider's logout token names; return how many.

    Raises BackchannelLogoutOff, or InvalidLogoutToken (nothing is written then).
    """
    client = oauth_client(provider_id)
    if client is None or not client.config.backchannel_logout:
        raise BackchannelLogoutOff(provider_id)
    if not logout_token:
        raise InvalidLogoutToken("no logout_token")
    checked = validate_logout_token(
        logout_token,
        keys=client.keys,
        issuer=client.expected_issuer,
        client_id=client.config.client.client_id,
        leeway=client.conf.id_token_leeway.total_seconds(),
    )
    now = utcnow()
    db.session.execute(delete(UsedLogoutToken).where(UsedLogoutToken.expires <= now))
    try:
        with db.session.begin_nested():
            db.session.execute(
                insert(UsedLogoutToken).values(
                    provider=provider_id,
                    jti=checked.jti,
                    expires=datetime.fromtimestamp(checked.refused_after, UTC),
                )
            )
    except IntegrityError:
        raise InvalidLogoutToken(f"jti {encode(checked.jti)} was used before") from None
    ended = end_provider_sessions(provider_id, sid=checked.sid, sub=checked.sub)
    for user_id, count in Counter(e.user_id for e in ended).items():
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            provider=provider_id,
            detail={"reason": trail.BACKCHANNEL, "sessions": count},
        )
    log.info(
        "%s: back-channel logout ended %d session(s) (sid %s, sub %s)",
        provider_id,
        len(ended),
        "given" if checked.sid else "none",
        "given" if checked.sub else "none",
    )
    transactions.on_commit(
        lambda: provider_signed_out.send(
            provider=provider_id,
            session_ids=[e.id for e in ended],
            user_ids=sorted({e.user_id for e in ended}),
        )
    )
    return len(ended)
