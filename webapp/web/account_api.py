"""JSON endpoints of the account area, for scripts: ``/account/api/...``.

Same flows as the pages. POSTs need the CSRF token in the ``X-CSRFToken`` header (from
``GET {base}/csrf``), like every POST here; a missing or wrong token is
``400 {"error": "MissingCSRF"}``. Signed out: ``401 {"error": "SessionRequired"}``.
Refusals: ``{"error": code, "message": text}`` with 404 (not yours or gone), 409 (last
sign-in method), 403 (recent sign-in needed) or 400 (confirmation missing, a name refused).
``POST /profile`` with ``{"name": text}`` sets the display name (``""`` clears it).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from webapp.core.cache_headers import mark_personal
from webapp.core.clock import iso_utc
from webapp.flows.account import account_page, deletion, linked_accounts, profile, sessions
from webapp.sessions.store import AuthSession
from webapp.web.answers import session_required

bp = Blueprint("account_api", __name__)
# Personal data, as the account pages: never cached by the browser or a proxy.
bp.before_request(mark_personal)


@bp.get("")
@session_required
def overview(session: AuthSession) -> Response:
    view = account_page.account_overview(user_id=session.user.id, session=session)
    user = view.user
    return jsonify(
        {
            "user": {
                "name": user.name,
                "email": user.email,
                "image": user.image,
                "emailVerified": user.email_verified is not None,
            },
            "accounts": [
                {
                    "id": a.id,
                    "provider": a.provider,
                    "providerName": a.provider_name,
                    "type": a.type,
                    "createdAt": iso_utc(a.created_at),
                    # False for the last way in, and for the e-mail sign-in that comes
                    # with the verified address (refused as LastSignInMethod).
                    "removable": view.can_unlink and not a.follows_address,
                }
                for a in view.accounts
            ],
            "canUnlink": view.can_unlink,
            "linkOptions": [{"id": o.id, "name": o.name} for o in view.link_options],
            "sessions": [
                {
                    "id": s.id,
                    "device": s.device,
                    "ip": s.ip,
                    "provider": s.provider,
                    "createdAt": iso_utc(s.created_at),
                    "lastActiveAt": iso_utc(s.last_active_at),
                    "current": s.current,
                }
                for s in view.sessions
            ],
            "recentlySignedIn": view.recently_signed_in,
        }
    )


@bp.post("/profile")
@session_required
def set_profile(session: AuthSession) -> Response:
    """``{"name": "<text>"}`` sets the display name; ``""`` clears it."""
    body = request.get_json(silent=True)
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str):
        raise profile.invalid_name()
    return jsonify({"name": profile.set_name(user_id=session.user.id, name=name)})


@bp.post("/accounts/<id:account_id>/unlink")
@session_required
def unlink(session: AuthSession, account_id: int) -> Response:
    removed = linked_accounts.unlink_account(
        user_id=session.user.id, account_id=account_id, current=session
    )
    return jsonify({"unlinked": removed.id})


@bp.post("/sessions/<id:session_id>/end")
@session_required
def end_session(session: AuthSession, session_id: int) -> Response:
    own = sessions.end_session(user_id=session.user.id, session_id=session_id, current=session)
    return jsonify({"ended": session_id, "signedOut": own})


@bp.post("/sessions/end-others")
@session_required
def end_others(session: AuthSession) -> Response:
    count = sessions.end_other_sessions(user_id=session.user.id, current=session)
    return jsonify({"ended": count})


@bp.post("/delete")
@session_required
def delete(session: AuthSession) -> Response:
    body = request.get_json(silent=True)
    confirmation = body.get("confirm", "") if isinstance(body, dict) else ""
    deletion.delete_account(
        user_id=session.user.id, current=session, confirmation=str(confirmation)
    )
    return jsonify({"deleted": True})
