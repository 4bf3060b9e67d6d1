"""Stable error codes: one table of what each code means, and the exceptions that carry them.

Every refusal the app explains to a person or a script has a code here, with where it is
shown, its HTTP status and its text (docs/errors.md). Flows raise ``AuthError`` (sign-in)
or ``AccountError`` (account actions), both ``CodedError``; ``webapp.web.error_answers`` turns them
into answers, in one place. Details for operators go to the log, never to the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.i18n import N_, gettext

#: Where a code is shown: the sign-in page (the person retries in place), the error page,
#: or the account area (in place on its pages, JSON in /account/api).
SIGNIN_PAGE = "signin"
ERROR_PAGE = "error"
ACCOUNT = "account"


@dataclass(frozen=True)
class Code:
    """What a code means: where it is shown, with which HTTP status, and its text."""

    shown_on: str
    status: int
    title: str
    message: str
    #: What the person can do next.
    action: str

    def texts(self) -> dict[str, str]:
        """The title, message and action in the request's language."""
        return {
            "title": gettext(self.title),
            "message": gettext(self.message),
            "action": gettext(self.action),
        }


_DEFAULT = Code(
    ERROR_PAGE,
    200,
    N_("Something went wrong"),
    N_("We could not complete that request."),
    N_(
        "Try signing in again. If it keeps happening, contact the site's support with the "
        "reference below."
    ),
)

CODES: dict[str, Code] = {
    "Signin": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign-in failed"),
        N_("That sign-in option is not available."),
        N_("Choose one of the options below."),
    ),
    "OAuthSignin": Code(
        SIGNIN_PAGE,
        200,
        N_("Could not reach the sign-in provider"),
        N_("We could not start sign-in with that provider. It may be down or misconfigured."),
        N_("Try again in a moment, or choose another way to sign in."),
    ),
    "OAuthCallback": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign-in could not be verified"),
        N_("The answer from the sign-in provider did not pass our checks, or it took too long."),
        N_("Start again from this page; an old or reused sign-in link does not work twice."),
    ),
    "OAuthCreateAccount": Code(
        SIGNIN_PAGE,
        200,
        N_("Could not create your account"),
        N_("You signed in with the provider, but we could not create your account here."),
        N_("Try again, or choose another way to sign in."),
    ),
    "EmailCreateAccount": Code(
        SIGNIN_PAGE,
        200,
        N_("Could not create your account"),
        N_("Your e-mail link was valid, but we could not create your account here."),
        N_("Try again, or choose another way to sign in."),
    ),
    "Callback": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign-in was not completed"),
        N_("The sign-in provider reported a problem and did not sign you in."),
        N_("Try again, or choose another way to sign in."),
    ),
    "OAuthAccountNotLinked": Code(
        SIGNIN_PAGE,
        200,
        N_("This e-mail address is already in use"),
        N_(
            "An account with the same e-mail address exists, but it was created with another "
            "sign-in method."
        ),
        N_("Sign in the way you did before; once signed in you can link this provider too."),
    ),
    "SSORequired": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign in through your organisation"),
        N_("Addresses at your organisation sign in only through its own sign-in service."),
        N_("Choose “Continue with” to sign in through your organisation."),
    ),
    "EmailSignin": Code(
        SIGNIN_PAGE,
        200,
        N_("Could not send the e-mail"),
        N_("Check that the address is complete (like ann@example.com), or try again later."),
        N_("Enter your address again, or choose another way to sign in."),
    ),
    "CredentialsSignin": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign-in failed"),
        N_("Those details did not match, or there were too many attempts."),
        N_("Check what you entered and try again in a few minutes."),
    ),
    "PasskeySignin": Code(
        SIGNIN_PAGE,
        200,
        N_("Passkey sign-in failed"),
        N_("That passkey is not registered here, could not be checked, or the request expired."),
        N_("Try again, or choose another way to sign in."),
    ),
    "SessionRequired": Code(
        SIGNIN_PAGE,
        200,
        N_("Please sign in"),
        N_("You need to be signed in to see that page."),
        N_("Sign in below and you will be taken back to it."),
    ),
    "MissingCSRF": Code(
        SIGNIN_PAGE,
        200,
        N_("Your form expired"),
        N_(
            "The page was open too long or was submitted from somewhere else, so we did not "
            "act on it."
        ),
        N_("Nothing was changed. Please try again from this page."),
    ),
    "AccessDenied": Code(
        ERROR_PAGE,
        403,
        N_("Access denied"),
        N_("You do not have permission to sign in here, or sign-in was cancelled."),
        N_("If you think this is a mistake, contact the site's support with the reference below."),
    ),
    "Verification": Code(
        ERROR_PAGE,
        403,
        N_("This sign-in link no longer works"),
        N_(
            "The link has expired, was already used, or is incomplete. Each link works once, "
            "for a limited time."
        ),
        N_("Request a new link from the sign-in page."),
    ),
    "RateLimited": Code(
        ERROR_PAGE,
        429,
        N_("Too many attempts"),
        N_("Too many requests came from your network in a short time, so we paused this one."),
        N_("Wait a few minutes, then try again."),
    ),
    "SecondFactorExpired": Code(
        SIGNIN_PAGE,
        200,
        N_("Sign-in was not finished in time"),
        N_("The second step of your sign-in expired or was started in another browser."),
        N_("Sign in again; you will be asked for your code straight after."),
    ),
    "SecondFactorPasskey": Code(
        SIGNIN_PAGE,
        200,
        N_("Use your code for the second step"),
        N_("You signed in with a passkey, so the second step needs something else."),
        N_("Sign in again and enter the code from your authenticator app, or a recovery code."),
    ),
    "SecondFactorThrottled": Code(
        SIGNIN_PAGE,
        200,
        N_("Too many wrong codes"),
        N_("For your safety, sign-in with a code is paused for this account for a while."),
        N_("Wait a while, then sign in again. A recovery code works in place of the app."),
    ),
    "Configuration": Code(
        ERROR_PAGE,
        500,
        N_("Server configuration problem"),
        N_("The site's sign-in is not set up correctly."),
        N_("This is not your fault. Please tell the site's support, with the reference below."),
    ),
    # Account actions (the account pages show the message in place; /account/api answers
    # JSON with the status). Their raisers usually give a more precise message.
    "NotFound": Code(
        ACCOUNT,
        404,
        N_("Not found"),
        N_("That is not (or no longer) part of your account."),
        N_("Reload your account page."),
    ),
    "LastSignInMethod": Code(
        ACCOUNT,
        409,
        N_("Your only way to sign in"),
        N_("This is your only way to sign in, so it cannot be removed."),
        N_("Link another provider first."),
    ),
    "EmailSignInKept": Code(
        ACCOUNT,
        409,
        N_("E-mail sign-in stays"),
        N_("E-mail sign-in comes with your verified address, so it cannot be removed."),
        N_("Turn on two-step verification so that a link alone is not enough to sign in."),
    ),
    "WrongCode": Code(
        ACCOUNT,
        400,
        N_("That code is not right"),
        N_("The code did not match your authenticator app."),
        N_("Check the app's clock and enter the code it shows now."),
    ),
    "TwoFactorAlreadyOn": Code(
        ACCOUNT,
        409,
        N_("Two-step verification is already on"),
        N_("Two-step verification is already on for your account."),
        N_("Turn it off first to move it to another app."),
    ),
    "TwoFactorNotOn": Code(
        ACCOUNT,
        409,
        N_("Two-step verification is not on"),
        N_("Two-step verification is not on for your account."),
        N_("Set up an authenticator app first."),
    ),
    "RecentSignInRequired": Code(
        ACCOUNT,
        403,
        N_("Confirm it is you"),
        N_("For your safety, this needs a recent sign-in."),
        N_("Confirm it is you, and you will be brought back here."),
    ),
    "RefreshAccessTokenError": Code(
        ACCOUNT,
        409,
        N_("Sign in with the provider again"),
        N_("Your access at the sign-in provider has ended, so we cannot act there for you."),
        N_("Sign in with that provider again."),
    ),
    "ProviderUnavailable": Code(
        ACCOUNT,
        503,
        N_("The sign-in provider is not answering"),
        N_("We could not reach the sign-in provider just now. Nothing was changed."),
        N_("Try again in a moment."),
    ),
    "PasskeyNotAdded": Code(
        ACCOUNT,
        400,
        N_("The passkey was not added"),
        N_("Your device's answer could not be checked, or the request expired."),
        N_("Try adding it again."),
    ),
    "InvalidName": Code(
        ACCOUNT,
        400,
        N_("Check the name"),
        N_("A name needs 1 to 64 characters, and no control characters."),
        N_("Type a name of at most 64 characters."),
    ),
    "ConfirmationRequired": Code(
        ACCOUNT,
        400,
        N_("Please confirm"),
        N_("This action needs you to confirm it first."),
        N_("Type the confirmation asked for."),
    ),
    "InvalidEmail": Code(
        ACCOUNT,
        400,
        N_("Check the e-mail address"),
        N_("That is not an e-mail address we can send a message to."),
        N_("Type the whole address, like ann@example.com."),
    ),
    "EmailNotSent": Code(
        ACCOUNT,
        503,
        N_("The e-mail was not sent"),
        N_("We could not send the message just now. Nothing was changed."),
        N_("Try again in a few minutes."),
    ),
    "EmailChangeLink": Code(
        ACCOUNT,
        400,
        N_("This link no longer works"),
        N_(
            "The link has expired, was already used or replaced by a newer one, or is not for "
            "the account you are signed in to."
        ),
        N_("Ask for a new link on your account page."),
    ),
    "EmailInUse": Code(
        ACCOUNT,
        409,
        N_("This e-mail address is already in use"),
        N_("Another account has this e-mail address, so it cannot become yours as well."),
        N_("Sign in to that account and change its address or delete it first."),
    ),
}

#: Codes shown on the sign-in page, so the person can retry in place.
SIGNIN_CODES = frozenset(code for code, c in CODES.items() if c.shown_on == SIGNIN_PAGE)


def known_code(code: str | None) -> str | None:
    """Return ``code`` if it is one of ours, else None: a page never shows a code it was
    handed in a URL that we did not define (``?error=Call +1-555-0100``)."""
    return code if code in CODES else None


def code_for(code: str | None) -> Code:
    """Return the table entry for ``code``; unknown or missing codes get a generic one."""
    return CODES.get(code or "", _DEFAULT)


def error_page_code(code: str | None) -> Code:
    """Return what the error page shows for ``code``: its entry if it is an error-page code,
    else the generic one (status 200)."""
    entry = code_for(code)
    return entry if entry.shown_on == ERROR_PAGE else _DEFAULT


class CodedError(Exception):
    """A refusal with a stable code from ``CODES``; ``detail`` goes to the log only.

    The request's writes are discarded, unless ``keep`` says they must stand (a one-time
    code burnt by its last wrong try): see ``webapp.storage.transactions``.
    """

    def __init__(self, code: str, detail: str | None = None, *, keep: bool = False) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(code)
        self.code = code
        self.detail = detail
        self.keep = keep

    def __str__(self) -> str:  # never used on a page; for logs
        return f"{self.code}: {self.detail}" if self.detail else self.code


class AuthError(CodedError):
    """A sign-in flow failed: the browser goes to the error route with the code."""


class AccountError(CodedError):
    """An account action was refused; ``message`` is for the person, precise to the case."""

    def __init__(self, code: str, message: str | None = None, *, keep: bool = False) -> None:
        super().__init__(code, message, keep=keep)
        self.message = message or gettext(code_for(code).message)
