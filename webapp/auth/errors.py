"""Stable error codes: the exception flows raise, and what each code tells a person."""

from __future__ import annotations

from dataclasses import dataclass

#: Codes shown on the sign-in page, so the person can retry in place (docs/errors.md).
SIGNIN_CODES = frozenset(
    {
        "Signin",
        "OAuthSignin",
        "OAuthCallback",
        "OAuthCreateAccount",
        "EmailCreateAccount",
        "Callback",
        "OAuthAccountNotLinked",
        "EmailSignin",
        "CredentialsSignin",
        "SessionRequired",
        "MissingCSRF",
    }
)
#: Codes that render the error page, with their HTTP status.
ERROR_PAGE_STATUS = {"Configuration": 500, "AccessDenied": 403, "Verification": 403}
ALL_CODES = SIGNIN_CODES | ERROR_PAGE_STATUS.keys()


@dataclass(frozen=True)
class ErrorText:
    title: str
    message: str
    #: What the person can do next.
    action: str


_DEFAULT = ErrorText(
    "Something went wrong",
    "We could not complete that request.",
    "Try signing in again. If it keeps happening, contact the site's support with the "
    "reference below.",
)

MESSAGES: dict[str, ErrorText] = {
    "Signin": ErrorText(
        "Sign-in failed",
        "That sign-in option is not available.",
        "Choose one of the options below.",
    ),
    "OAuthSignin": ErrorText(
        "Could not reach the sign-in provider",
        "We could not start sign-in with that provider. It may be down or misconfigured.",
        "Try again in a moment, or choose another way to sign in.",
    ),
    "OAuthCallback": ErrorText(
        "Sign-in could not be verified",
        "The answer from the sign-in provider did not pass our checks, or it took too long.",
        "Start again from this page; an old or reused sign-in link does not work twice.",
    ),
    "OAuthCreateAccount": ErrorText(
        "Could not create your account",
        "You signed in with the provider, but we could not create your account here.",
        "Try again, or choose another way to sign in.",
    ),
    "EmailCreateAccount": ErrorText(
        "Could not create your account",
        "Your e-mail link was valid, but we could not create your account here.",
        "Try again, or choose another way to sign in.",
    ),
    "Callback": ErrorText(
        "Sign-in was not completed",
        "The sign-in provider reported a problem and did not sign you in.",
        "Try again, or choose another way to sign in.",
    ),
    "OAuthAccountNotLinked": ErrorText(
        "This e-mail address is already in use",
        "An account with the same e-mail address exists, but it was created with another "
        "sign-in method.",
        "Sign in the way you did before; once signed in you can link this provider too.",
    ),
    "EmailSignin": ErrorText(
        "Could not send the e-mail",
        "Check that the address is complete (like ann@example.com), or try again later.",
        "Enter your address again, or choose another way to sign in.",
    ),
    "CredentialsSignin": ErrorText(
        "Sign-in failed",
        "Those details did not match, or there were too many attempts.",
        "Check what you entered and try again in a few minutes.",
    ),
    "SessionRequired": ErrorText(
        "Please sign in",
        "You need to be signed in to see that page.",
        "Sign in below and you will be taken back to it.",
    ),
    "MissingCSRF": ErrorText(
        "Your form expired",
        "The page was open too long or was submitted from somewhere else, so we did not act on it.",
        "Nothing was changed. Please try again from this page.",
    ),
    "AccessDenied": ErrorText(
        "Access denied",
        "You do not have permission to sign in here, or sign-in was cancelled.",
        "If you think this is a mistake, contact the site's support with the reference below.",
    ),
    "Verification": ErrorText(
        "This sign-in link no longer works",
        "The link has expired, was already used, or is incomplete. Each link works once, "
        "for a limited time.",
        "Request a new link from the sign-in page.",
    ),
    "Configuration": ErrorText(
        "Server configuration problem",
        "The site's sign-in is not set up correctly.",
        "This is not your fault. Please tell the site's support, with the reference below.",
    ),
}


def message_for(code: str | None) -> ErrorText:
    """Return the text for ``code``; unknown or missing codes get a generic text."""
    return MESSAGES.get(code or "", _DEFAULT)


def error_status(code: str | None) -> int:
    """Return the error page's HTTP status for ``code`` (200 for unknown codes)."""
    return ERROR_PAGE_STATUS.get(code or "", 200)


class AuthError(Exception):
    """A sign-in flow failed with a stable code; ``detail`` goes to the log only."""

    def __init__(self, code: str, detail: str | None = None) -> None:
        if code not in ALL_CODES:
            raise ValueError(f"unknown auth error code {code!r}")
        super().__init__(code)
        self.code = code
        self.detail = detail

    def __str__(self) -> str:  # never used on a page; for logs
        return f"{self.code}: {self.detail}" if self.detail else self.code
