"""The hooks and signals, under the import path the first releases documented.

``webapp.auth`` exports the same names; new code imports them from there.
"""

from webapp.core.hooks import (  # noqa: F401
    AuthHooks,
    UserInfo,
    account_linked,
    current_hooks,
    provider_signed_out,
    revocation_failed,
    session_read,
    signed_in,
    signed_out,
    user_created,
)
