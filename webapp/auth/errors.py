"""Stable error codes: one table of what each code means, and the exceptions that carry them.

Every refusal the app explains to a person or a script has a code here, with where it is
shown, its HTTP status and its text (docs/errors.md). Flows raise ``AuthError`` (sign-in)
or ``AccountError`` (account actions), both ``CodedError``; ``webapp.errors`` turns them
into answers, in one place. Details for operators go to the log, never to the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

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


_DEFAULT = Code(
    ERROR_PAGE,
    200,
    "Something went wrong",
    "We could not complete that request.",
    "Try signing in again. If it keeps happening, contact the site's support with the "
    "reference below.",
)

CODES: dict[str, Code] = {
    "Signin": Code(
        SIGNIN_PAGE,
        200,
        "Sign-in failed",
        "That sign-in option is not available.",
        "Choose one of the options below.",
    ),
    "OAuthSignin": Code(
        SIGNIN_PAGE,
        200,
        "Could not reach the sign-in provider",
        "We could not start sign-in with that provider. It may be down or misconfigured.",
        "Try again in a moment, or choose another way to sign in.",
    ),
    "OAuthCallback": Code(
        SIGNIN_PAGE,
        200,
        "Sign-in could not be verified",
        "The answer from the sign-in provider did not pass our checks, or it took too long.",
        "Start again from this page; an old or reused sign-in link does not work twice.",
    ),
    "OAuthCreateAccount": Code(
        SIGNIN_PAGE,
        200,
        "Could not create your account",
        "You signed in with the provider, but we could not create your account here.",
        "Try again, or choose another way to sign in.",
    ),
    "EmailCreateAccount": Code(
        SIGNIN_PAGE,
        200,
        "Could not create your account",
        "Your e-mail link was valid, but we could not create your account here.",
        "Try again, or choose another way to sign in.",
    ),
    "Callback": Code(
        SIGNIN_PAGE,
        200,
        "Sign-in was not completed",
        "The sign-in provider reported a problem and did not sign you in.",
        "Try again, or choose another way to sign in.",
    ),
    "OAuthAccountNotLinked": Code(
        SIGNIN_PAGE,
        200,
        "This e-mail address is already in use",
        "An account with the same e-mail address exists, but it was created with another "
        "sign-in method.",
        "Sign in the way you did before; once signed in you can link this provider too.",
    ),
    "EmailSignin": Code(
        SIGNIN_PAGE,
        200,
        "Could not send the e-mail",
        "Check that the address is complete (like ann@example.com), or try again later.",
        "Enter your address again, or choose another way to sign in.",
    ),
    "CredentialsSignin": Code(
        SIGNIN_PAGE,
        200,
        "Sign-in failed",
        "Those details did not match, or there were too many attempts.",
        "Check what you entered and try again in a few minutes.",
    ),
    "PasskeySignin": Code(
        SIGNIN_PAGE,
        200,
        "Passkey sign-in failed",
        "That passkey is not registered here, could not be checked, or the request expired.",
        "Try again, or choose another way to sign in.",
    ),
    "SessionRequired": Code(
        SIGNIN_PAGE,
        200,
        "Please sign in",
        "You need to be signed in to see that page.",
        "Sign in below and you will be taken back to it.",
    ),
    "MissingCSRF": Code(
        SIGNIN_PAGE,
        200,
        "Your form expired",
        "The page was open too long or was submitted from somewhere else, so we did not act on it.",
        "Nothing was changed. Please try again from this page.",
    ),
    "AccessDenied": Code(
        ERROR_PAGE,
        403,
        "Access denied",
        "You do not have permission to sign in here, or sign-in was cancelled.",
        "If you think this is a mistake, contact the site's support with the reference below.",
    ),
    "Verification": Code(
        ERROR_PAGE,
        403,
        "This sign-in link no longer works",
        "The link has expired, was already used, or is incomplete. Each link works once, "
        "for a limited time.",
        "Request a new link from the sign-in page.",
    ),
    "SecondFactorExpired": Code(
        SIGNIN_PAGE,
        200,
        "Sign-in was not finished in time",
        "The second step of your sign-in expired or was started in another browser.",
        "Sign in again; you will be asked for your code straight after.",
    ),
    "SecondFactorPasskey": Code(
        SIGNIN_PAGE,
        200,
        "Use your code for the second step",
        "You signed in with a passkey, so the second step needs something else.",
        "Sign in again and enter the code from your authenticator app, or a recovery code.",
    ),
    "SecondFactorThrottled": Code(
        SIGNIN_PAGE,
        200,
        "Too many wrong codes",
        "For your safety, sign-in with a code is paused for this account for a while.",
        "Wait a while, then sign in again. A recovery code works in place of the app.",
    ),
    "Configuration": Code(
        ERROR_PAGE,
        500,
        "Server configuration problem",
        "The site's sign-in is not set up correctly.",
        "This is not your fault. Please tell the site's support, with the reference below.",
    ),
    # Account actions (the account pages show the message in place; /account/api answers
    # JSON with the status). Their raisers usually give a more precise message.
    "NotFound": Code(
        ACCOUNT,
        404,
        "Not found",
        "That is not (or no longer) part of your account.",
        "Reload your account page.",
    ),
    "LastSignInMethod": Code(
        ACCOUNT,
        409,
        "Your only way to sign in",
        "This is your only way to sign in, so it cannot be removed.",
        "Link another provider first.",
    ),
    "EmailSignInKept": Code(
        ACCOUNT,
        409,
        "E-mail sign-in stays",
        "E-mail sign-in comes with your verified address, so it cannot be removed.",
        "Turn on two-step verification so that a link alone is not enough to sign in.",
    ),
    "WrongCode": Code(
        ACCOUNT,
        400,
        "That code is not right",
        "The code did not match your authenticator app.",
        "Check the app's clock and enter the code it shows now.",
    ),
    "TwoFactorAlreadyOn": Code(
        ACCOUNT,
        409,
        "Two-step verification is already on",
        "Two-step verification is already on for your account.",
        "Turn it off first to move it to another app.",
    ),
    "TwoFactorNotOn": Code(
        ACCOUNT,
        409,
        "Two-step verification is not on",
        "Two-step verification is not on for your account.",
        "Set up an authenticator app first.",
    ),
    "RecentSignInRequired": Code(
        ACCOUNT,
        403,
        "Confirm it is you",
        "For your safety, this needs a recent sign-in.",
        "Confirm it is you, and you will be brought back here.",
    ),
    "RefreshAccessTokenError": Code(
        ACCOUNT,
        409,
        "Sign in with the provider again",
        "Your access at the sign-in provider has ended, so we cannot act there for you.",
        "Sign in with that provider again.",
    ),
    "ProviderUnavailable": Code(
        ACCOUNT,
        503,
        "The sign-in provider is not answering",
        "We could not reach the sign-in provider just now. Nothing was changed.",
        "Try again in a moment.",
    ),
    "PasskeyNotAdded": Code(
        ACCOUNT,
        400,
        "The passkey was not added",
        "Your device's answer could not be checked, or the request expired.",
        "Try adding it again.",
    ),
    "InvalidName": Code(
        ACCOUNT,
        400,
        "Check the name",
        "A name needs 1 to 64 characters, and no control characters.",
        "Type a name of at most 64 characters.",
    ),
    "ConfirmationRequired": Code(
        ACCOUNT,
        400,
        "Please confirm",
        "This action needs you to confirm it first.",
        "Type the confirmation asked for.",
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
    code burnt by its last wrong try): see ``webapp.transactions``.
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

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(code, message)
        self.message = message or code_for(code).message
