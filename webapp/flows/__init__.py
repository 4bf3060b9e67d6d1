"""The use cases, one module each, below the HTTP edge (``webapp.web``) and the CLI.

``signin/`` (every way to sign in), ``linking`` (linking a provider to the signed-in
person: the re-authentication both ends of its round trip need), ``signout`` (here, and at
the provider), ``backchannel`` (a provider's logout token), ``provider_tokens`` (a user's
tokens at a provider), ``bearer`` (API callers signed in by a provider's access token),
``notices`` (the security notices by e-mail) and ``account/`` (the account area).

A flow takes plain values (the client's address, a cookie's value; never the request),
raises a coded error (``webapp.errors``) and returns where the browser goes next; it never
builds a response. It reads the configured providers (``webapp.providers``) and is built
from the feature packages (``sessions``, ``second_factor``, ``passkeys``, ``browser_state``,
``audit``, ``mail``, ``oauth``) and the building blocks (``core``, ``storage``).
"""
