"""A small Django project serving django-oauth-toolkit (DOT) as an OpenID Provider on
loopback, for tests/interop/test_django_oauth_toolkit.py; ``tests/interop/dot_provider.py``
starts it (``python -m tests.interop.django_provider``) and drives it.

Test infrastructure, not product code: everything it knows (port, issuer, signing keys,
users, applications) comes from ``config.json`` in the directory the ``DOT_PROVIDER_DIR``
environment variable names, which also holds its SQLite database and its request log.

* ``settings``: Django and DOT settings (OIDC on, RS256, refresh token rotation,
  RP-initiated logout, the device grant, introspection and revocation).
* ``urls``: DOT under ``/o/`` (so the issuer is ``http://127.0.0.1:<port>/o``), Django's
  login page, and DOT's device authorization endpoint with the oauthlib 4 workaround.
* ``validators``: the OAuth2 validator whose ``sub`` is the username (DOT's default is the
  user's primary key), plus the e-mail and name claims.
* ``request_log``: a middleware writing one JSON line per request under ``/o/`` (no
  secrets), so a test can tell what reached the provider.
* ``seed``: users and Applications from the configuration, idempotent.
* ``__main__``: migrate, seed, serve (a threaded wsgiref server), print ``ready``.
"""
