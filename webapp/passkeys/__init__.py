"""Passkeys (WebAuthn): the relying party, where passkeys can be offered, their names and
texts (``relying_party``); options and verification with py_webauthn (``protocol``); the
single-use challenge (``challenges``); authenticator model names (``aaguids``)."""
