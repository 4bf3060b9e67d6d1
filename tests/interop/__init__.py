"""Interop: the app against identity providers nobody on the team wrote, each started on
loopback by the suite (django-oauth-toolkit, Glewlwyd), beside tests/op's oidc-provider."""
