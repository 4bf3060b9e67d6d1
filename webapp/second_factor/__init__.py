"""Two-step verification: whether a user has a second factor and checking a code
(``verification``), the authenticator app's codes (``totp``), recovery codes (``recovery_codes``),
and a sign-in waiting for its second factor, sealed in a cookie (``pending_signin``)."""
