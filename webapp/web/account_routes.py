"""The account area's pages: ``/account`` and its forms, each usable with or without htmx.

A form posts to its own URL. A plain post gets a 303 back to ``/account#<section>`` with a
flashed message; an htmx post (``HX-Request``) gets only the section it changed, message
included, which htmx swaps in place. An action that signs this browser out (ending its own
session, deleting the account) leaves the area with a full navigation home.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar, cast

from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    get_flashed_messages,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import current_user

from webapp.browser_state import cookies
from webapp.core.cache_headers import mark_personal
from webapp.core.redirects import is_safe_callback_url
from webapp.errors import AccountError
from webapp.flows.account import (
    account_page,
    deletion,
    linked_accounts,
    passkeys,
    profile,
    recent_signin,
    sessions,
    two_factor,
)
from webapp.flows.signin.second_factor import TooManyCodes, WrongCode, step_up_with_code
from webapp.i18n import (
    COOKIE_MAX_AGE,
    gettext,
    known_codes,
    language_choices,
    locale_cookie_name,
    ngettext,
    speaking,
)
from webapp.second_factor import recovery_codes
from webapp.sessions import reauthentication
from webapp.sessions.store import AuthSession, current_session
from webapp.storage import transactions
from webapp.web.account_display import breakable
from webapp.web.extensions import login_manager

bp = Blueprint("account", __name__)
# Every answer here is personal, even the signed-out redirect: never cached (ui.csp).
bp.before_request(mark_personal)
bp.add_app_template_filter(breakable, "breakable")

#: The template of each section an action can re-render.
SECTIONS = {
    "profile": "account/_profile.html",
    "accounts": "account/_accounts.html",
    "passkeys": "account/_passkeys.html",
    "two-factor": "account/_two_factor.html",
    "sessions": "account/_sessions.html",
    "delete": "account/_delete.html",
}
#: The sections whose offers depend on how many ways in are left ("Remove", "your only way
#: to sign in", what two-step verification asks for): removing a way in re-renders them
#: all, with htmx the others out of band, so that none offers what is no longer allowed.
WAYS_IN = ("accounts", "passkeys", "two-factor")


@dataclass(frozen=True)
class Done:
    """A successful action: the message to show, and whether this browser is signed out."""

    message: str
    signed_out: bool = False


F = TypeVar("F", bound=Callable[..., Any])


def browser_session_required(view: F) -> F:
    """``login_required`` for a browser session: an API caller's bearer token does not
    open the account area (its changes rest on the session: CSRF, recent sign-in)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if current_session() is None:
            return login_manager.unauthorized()
        return view(*args, **kwargs)

    return cast(F, wrapper)


def _session() -> AuthSession:
    session = current_session()
    assert session is not None  # browser_session_required ran first
    return session


def _is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"


@bp.get("/account")
@browser_session_required
def overview() -> str:
    view = account_page.account_overview(
        user_id=current_user.id, session=_session(), activity=account_page.ACTIVITY_FIRST
    )
    # After a plain-form action, its message was flashed with the section it belongs to.
    notices = {}
    for kind, text in cast(list[tuple[str, str]], get_flashed_messages(with_categories=True)):
        category, _, section = kind.partition(" ")
        if section:
            notices[section] = {"text": text, "category": category}
    return render_template(
        "account/index.html",
        view=view,
        notices=notices,
        two_factor=view.two_factor,
        activity=view.activity,
    )


@bp.get("/account/activity")
@browser_session_required
def activity() -> str:
    """The "Show more" of "Recent activity": the next entries, for htmx to put in place of
    the button; without JavaScript, a page of them with its own "Show more"."""
    entries = account_page.recent_activity(user_id=current_user.id, before=_before())
    if _is_htmx():
        return render_template("account/_activity_items.html", activity=entries)
    return render_template("account/activity.html", activity=entries)


def _before() -> int | None:
    """The ``before`` parameter: an event id (a row id's range), else None (the start)."""
    raw = request.args.get("before", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        return None
    number = int(raw)
    return number if 0 < number < 2**63 else None


@bp.get("/account/confirm")
@browser_session_required
def confirm() -> str:
    """Ask for a fresh proof of presence (a second-factor code, a passkey, or a sign-in
    with a method the user already has), then go to ``next``."""
    return _confirm_page(_confirm_next(), None)


def _confirm_next() -> str:
    next_path = request.values.get("next", "")
    if not is_safe_callback_url(next_path) or not next_path.startswith("/"):
        next_path = url_for("account.overview")
    return next_path


def _confirm_page(next_path: str, problem: str | None) -> str:
    return render_template(
        "account/confirm.html",
        methods=recent_signin.confirmation_methods(user_id=current_user.id),
        factors=two_factor.status(current_user.id),
        next_path=next_path,
        minutes=reauthentication.window_minutes(),
        problem=problem,
        # What a code sent by e-mail confirms, for its message and page to say.
        purpose=(
            "delete-account"
            if next_path == url_for("account.overview", _anchor="delete")
            else "confirm"
        ),
    )


@bp.post("/account/profile/name")
@browser_session_required
def set_name() -> ResponseReturnValue:
    def action() -> Done:
        # One name, or none: a form that sends none or several is refused, never guessed.
        sent = request.form.getlist("name")
        if len(sent) != 1:
            raise profile.invalid_name()
        name = profile.set_name(user_id=current_user.id, name=sent[0])
        if name is None:
            return Done(gettext("Your name was removed."))
        return Done(gettext("Your name is now “%(name)s”.", name=name))

    return _respond("profile", action)


@bp.post("/account/email")
@browser_session_required
def request_email_change() -> ResponseReturnValue:
    def action() -> Done:
        pending = profile.request_email_change(
            user_id=current_user.id,
            current=_session(),
            email=request.form.get("email", ""),
            client_address=request.remote_addr,
        )
        return Done(_link_sent(pending))

    return _respond("profile", action, again=url_for("account.overview", _anchor="profile"))


@bp.post("/account/email/resend")
@browser_session_required
def resend_email_change() -> ResponseReturnValue:
    def action() -> Done:
        pending = profile.resend_email_change(
            user_id=current_user.id, client_address=request.remote_addr
        )
        return Done(_link_sent(pending))

    return _respond("profile", action)


def _link_sent(pending: profile.PendingChange) -> str:
    return gettext(
        "A link was sent to %(address)s. Your address changes when you open it, signed in "
        "here; until then it stays as it is.",
        address=pending.email,
    )


@bp.post("/account/email/cancel")
@browser_session_required
def cancel_email_change() -> ResponseReturnValue:
    def action() -> Done:
        address = profile.cancel_email_change(user_id=current_user.id)
        return Done(
            gettext(
                "The change to %(address)s was cancelled; its link no longer works.",
                address=address,
            )
        )

    return _respond("profile", action)


@bp.get("/account/email/confirm")
@browser_session_required
def email_change_page() -> ResponseReturnValue:
    """What the link in the message opens: the change it makes, and one button. A GET
    changes nothing (mail scanners open every link); a link that would not work goes back
    to the profile, saying so."""
    token = request.args.get("token", "")
    try:
        pending = profile.check_email_change(user_id=current_user.id, token=token)
    except AccountError as exc:
        return _refused(exc, "profile", again=None)
    return render_template("account/email_confirm.html", pending=pending, token=token)


@bp.post("/account/email/confirm")
@browser_session_required
def confirm_email_change() -> ResponseReturnValue:
    def action() -> Done:
        address = profile.confirm_email_change(
            user_id=current_user.id, token=request.form.get("token", "")
        )
        return Done(gettext("Your e-mail address is now %(address)s.", address=address))

    return _respond("profile", action)


@bp.get("/account/link/<provider_id>")
@browser_session_required
def link_page(provider_id: str) -> ResponseReturnValue:
    """The step a confirmation returns to before linking: one button, no surprise."""
    option = linked_accounts.link_option(user_id=current_user.id, provider_id=provider_id)
    if option is None:
        return redirect(url_for("account.overview", _anchor="accounts"), code=303)
    return render_template("account/link.html", option=option)


@bp.get("/account/accounts/<id:account_id>/unlink")
@browser_session_required
def unlink_page(account_id: int) -> ResponseReturnValue:
    """Ask before removing a method: this page (with htmx, only its question, put in
    place), which is also the step a confirmation returns to. The e-mail sign-in of the
    verified address is no method to remove: the account page explains it instead."""
    account = linked_accounts.sign_in_method(user_id=current_user.id, account_id=account_id)
    if account is None or account.follows_address:
        return _back_to("accounts")
    return _ask_before_removing("account", account)


@bp.get("/account/passkeys/<id:passkey_id>/remove")
@browser_session_required
def remove_passkey_page(passkey_id: int) -> ResponseReturnValue:
    """Ask before removing a passkey, as before removing a provider."""
    passkey = passkeys.find_passkey(user_id=current_user.id, passkey_id=passkey_id)
    if passkey is None:
        return _back_to("passkeys")
    return _ask_before_removing("passkey", passkey)


def _ask_before_removing(kind: str, item: object) -> str:
    """The question before a removal (``kind``: "account", "passkey", or "two-factor" for
    the authenticator app): only the question for htmx to put in the row, else a page of
    its own (JavaScript off, or back from a confirmation)."""
    template = "account/_remove.html" if _is_htmx() else "account/remove.html"
    return render_template(template, kind=kind, item=item, page=not _is_htmx())


def _back_to(section: str) -> ResponseReturnValue:
    target = url_for("account.overview", _anchor=section)
    if _is_htmx():
        return Response(status=204, headers={"HX-Redirect": target})
    return redirect(target, code=303)


@bp.post("/account/accounts/<id:account_id>/unlink")
@browser_session_required
def unlink(account_id: int) -> ResponseReturnValue:
    def action() -> Done:
        removed = linked_accounts.unlink_account(
            user_id=current_user.id, account_id=account_id, current=_session()
        )
        return Done(
            gettext(
                "%(provider)s was removed from your sign-in methods.",
                provider=removed.provider_name,
            )
        )

    return _respond(
        "accounts",
        action,
        again=url_for("account.unlink_page", account_id=account_id),
        also=WAYS_IN,
    )


@bp.post("/account/passkeys/<id:passkey_id>/rename")
@browser_session_required
def rename_passkey(passkey_id: int) -> ResponseReturnValue:
    def action() -> Done:
        renamed = passkeys.rename_passkey(
            user_id=current_user.id, passkey_id=passkey_id, name=request.form.get("name", "")
        )
        return Done(gettext("The passkey is now called “%(name)s”.", name=renamed.name))

    return _respond("passkeys", action)


@bp.post("/account/passkeys/<id:passkey_id>/remove")
@browser_session_required
def remove_passkey(passkey_id: int) -> ResponseReturnValue:
    def action() -> Done:
        removed = passkeys.remove_passkey(
            user_id=current_user.id, passkey_id=passkey_id, current=_session()
        )
        return Done(
            gettext(
                "The passkey “%(name)s” was removed; it no longer signs you in.",
                name=removed.name,
            )
        )

    return _respond(
        "passkeys",
        action,
        again=url_for("account.remove_passkey_page", passkey_id=passkey_id),
        also=WAYS_IN,
    )


@bp.post("/account/sessions/<id:session_id>/end")
@browser_session_required
def end_session(session_id: int) -> ResponseReturnValue:
    def action() -> Done:
        own = sessions.end_session(
            user_id=current_user.id, session_id=session_id, current=_session()
        )
        message = gettext("You are signed out.") if own else gettext("That session was signed out.")
        return Done(message, own)

    return _respond("sessions", action)


@bp.post("/account/sessions/end-others")
@browser_session_required
def end_others() -> ResponseReturnValue:
    def action() -> Done:
        count = sessions.end_other_sessions(user_id=current_user.id, current=_session())
        return Done(
            ngettext(
                "Signed out %(num)d other session.", "Signed out %(num)d other sessions.", count
            )
        )

    return _respond("sessions", action, again=url_for("account.overview", _anchor="sessions"))


@bp.get("/account/two-factor")
@browser_session_required
def two_factor_setup() -> ResponseReturnValue:
    """Step one of turning on two-step verification: the key, as text, link and QR code."""
    try:
        setup = two_factor.begin_setup(user_id=current_user.id, current=_session())
    except AccountError as exc:
        return _refused(exc, "two-factor", again=url_for("account.two_factor_setup"))
    return render_template("account/two_factor_setup.html", setup=setup, problem=None)


@bp.post("/account/two-factor")
@browser_session_required
def two_factor_confirm() -> ResponseReturnValue:
    """Step two: a right code from the app turns it on and shows the recovery codes once."""
    try:
        codes = two_factor.confirm_setup(
            user_id=current_user.id, current=_session(), code=request.form.get("code", "")
        )
    except AccountError as exc:
        transactions.settle_refusal(keep=exc.keep)
        if exc.code != two_factor.WRONG_CODE:
            return _refused(exc, "two-factor", again=url_for("account.two_factor_setup"))
        setup = two_factor.begin_setup(user_id=current_user.id, current=_session())
        page = render_template("account/two_factor_setup.html", setup=setup, problem=exc.message)
        return page, 400
    return _codes_page(codes, first_time=True)


@bp.post("/account/two-factor/recovery-codes")
@browser_session_required
def two_factor_new_codes() -> ResponseReturnValue:
    try:
        codes = two_factor.new_recovery_codes(user_id=current_user.id, current=_session())
    except AccountError as exc:
        transactions.settle_refusal(keep=exc.keep)
        return _refused(exc, "two-factor", again=url_for("account.overview", _anchor="two-factor"))
    return _codes_page(codes, first_time=False)


def _codes_page(codes: list[str], *, first_time: bool) -> str:
    """The recovery codes, shown once. Its form carries them, for the download and for the
    footer's languages: the page cannot be asked for again, so they send it back."""
    return render_template(
        "account/two_factor_codes.html",
        codes=codes,
        first_time=first_time,
        languages=[
            (choice, url_for("account.two_factor_codes_language", code=choice.code), current)
            for choice, current in language_choices()
        ],
    )


def _codes_sent_back() -> list[str]:
    """The codes the recovery codes page sent back, if they still work (else AccountError)."""
    # One more than a page shows is enough to refuse too many.
    codes = [c[:64] for c in request.form.getlist("code")[: recovery_codes.COUNT + 1]]
    return two_factor.shown_codes(user_id=current_user.id, codes=codes)


@bp.post("/account/two-factor/recovery-codes/download")
@browser_session_required
def two_factor_codes_download() -> ResponseReturnValue:
    """The recovery codes page's "Download": its codes as a text file, the page staying."""
    try:
        codes = _codes_sent_back()
    except AccountError as exc:
        return _refused(exc, "two-factor", again=None)
    text = render_template(
        "account/recovery_codes.txt", codes=codes, who=current_user.email or current_user.name
    )
    return Response(
        text,
        mimetype="text/plain",
        headers={"Content-Disposition": 'attachment; filename="recovery-codes.txt"'},
    )


@bp.post("/account/two-factor/recovery-codes/language/<code>")
@browser_session_required
def two_factor_codes_language(code: str) -> ResponseReturnValue:
    """The recovery codes page's language footer: the same codes again, in ``code``."""
    if code not in known_codes():
        abort(404)
    try:
        codes = _codes_sent_back()
    except AccountError as exc:
        return _refused(exc, "two-factor", again=None)
    cookies.set_cookie(locale_cookie_name(), code, max_age=COOKIE_MAX_AGE)
    with speaking(code):
        return _codes_page(codes, first_time=request.form.get("first_time") == "1")


@bp.get("/account/two-factor/off")
@browser_session_required
def two_factor_off_page() -> ResponseReturnValue:
    """Ask before turning two-step verification off, as before removing a way in."""
    status = two_factor.status(current_user.id)
    if status.on_since is None:
        return _back_to("two-factor")
    return _ask_before_removing("two-factor", status)


@bp.post("/account/two-factor/off")
@browser_session_required
def two_factor_off() -> ResponseReturnValue:
    def action() -> Done:
        two_factor.turn_off(user_id=current_user.id, current=_session())
        return Done(gettext("Two-step verification is off; your recovery codes no longer work."))

    # The ways in say what two-step verification adds to them: re-render them too.
    return _respond(
        "two-factor", action, again=url_for("account.two_factor_off_page"), also=("accounts",)
    )


@bp.post("/account/confirm")
@browser_session_required
def confirm_with_code() -> ResponseReturnValue:
    """Confirm it is you with the authenticator app's code, then go on to ``next``."""
    next_path = _confirm_next()
    try:
        step_up_with_code(
            _session(), request.form.get("code", ""), client_address=request.remote_addr
        )
    except (WrongCode, TooManyCodes) as exc:
        transactions.discard()
        problem = (
            gettext("That code is not right. Try again.")
            if isinstance(exc, WrongCode)
            else gettext("Too many wrong codes for now. Wait a while, or confirm another way.")
        )
        return _confirm_page(next_path, problem), 400 if isinstance(exc, WrongCode) else 429
    return redirect(next_path, code=303)


@bp.post("/account/delete")
@browser_session_required
def delete() -> ResponseReturnValue:
    def action() -> Done:
        confirmation = request.form.get("confirm", "")
        deletion.delete_account(
            user_id=current_user.id, current=_session(), confirmation=confirmation
        )
        return Done(
            gettext("Your account and everything linked to it were deleted."), signed_out=True
        )

    return _respond("delete", action, again=url_for("account.overview", _anchor="delete"))


def _respond(
    section: str,
    action: Callable[[], Done],
    *,
    again: str | None = None,
    also: tuple[str, ...] = (),
) -> ResponseReturnValue:
    """Run ``action`` and answer: the section (htmx) or a redirect (plain form).

    An action refused for want of a recent sign-in sends the browser to the confirmation
    page, which leads back to ``again`` (the page to repeat the action from). ``also``: the
    sections a success may have changed besides ``section`` (htmx swaps them out of band).
    """
    try:
        done = action()
    except AccountError as exc:
        transactions.settle_refusal(keep=exc.keep)
        return _refused(exc, section, again=again, also=also)
    if done.signed_out:
        flash(done.message, "success")
        home = url_for("pages.index")
        if _is_htmx():
            # Swapping the home page into a section would be wrong: ask for a navigation.
            return Response(status=204, headers={"HX-Redirect": home})
        return redirect(home, code=303)
    return _answer(section, done.message, "success", also=also)


def _refused(
    exc: AccountError, section: str, *, again: str | None, also: tuple[str, ...] = ()
) -> ResponseReturnValue:
    """Answer a refused action: to the confirmation page when it needs a recent sign-in
    (then back to ``again``), else the section with the message (and, with htmx, ``also``
    as they are now: a removal refused as the last way in was shown a stale page)."""
    if exc.code == recent_signin.REAUTH_REQUIRED and again is not None:
        target = reauthentication.confirm_url(again)
        if _is_htmx():
            return Response(status=204, headers={"HX-Redirect": target})
        return redirect(target, code=303)
    return _answer(section, exc.message, "error", also=also)


def _answer(
    section: str, message: str, category: str, *, also: tuple[str, ...] = ()
) -> ResponseReturnValue:
    if not _is_htmx():
        flash(message, f"{category} {section}")
        return redirect(url_for("account.overview", _anchor=section), code=303)
    view = account_page.account_overview(user_id=current_user.id, session=_session())
    html = render_template(
        SECTIONS[section],
        view=view,
        two_factor=view.two_factor,
        notice={"text": message, "category": category},
    )
    for other in also:
        if other != section:
            html += render_template(
                SECTIONS[other], view=view, two_factor=view.two_factor, out_of_band=True
            )
    return html
