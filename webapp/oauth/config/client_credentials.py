"""Client authentication: the client id, and how the client proves itself at the token endpoint."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from webapp.oauth.client_auth import (
    METHODS,
    SECRET_METHODS,
    ClientCredentials,
    PrivateKey,
    load_private_key,
)
from webapp.oauth.config.table import Table
from webapp.oauth.presets import apple_client_secret
from webapp.settings import ConfigError

#: Apple's client secrets may live 6 months; ours are made per exchange and live 5 minutes.
_APPLE_SECRET_LIFETIME = 300


def client_credentials(table: Table) -> ClientCredentials:
    """client_id, token_endpoint_auth_method and what that method needs."""
    where = table.where
    client_id = table.text("client_id")
    if client_id is None:
        raise ConfigError(f"{where}: client_id is required")
    method = table.text("token_endpoint_auth_method") or "client_secret_basic"
    if method not in METHODS:
        known = ", ".join(METHODS)
        raise ConfigError(f"{where}: token_endpoint_auth_method must be one of {known}")
    key = _private_key(table)
    secret_factory = _signed_client_secret(table, client_id, key)
    if secret_factory is not None:
        return ClientCredentials(client_id=client_id, method=method, secret_factory=secret_factory)
    secret = table.text("client_secret")
    if method in SECRET_METHODS and secret is None:
        raise ConfigError(f"{where}: client_secret (or client_secret_env) is required for {method}")
    if method == "private_key_jwt" and key is None:
        raise ConfigError(f"{where}: client_private_key_file is required for private_key_jwt")
    return ClientCredentials(
        client_id=client_id,
        method=method,
        secret=secret,
        private_key=key,
        signing_alg=table.text("token_endpoint_auth_signing_alg"),
    )


def _private_key(table: Table) -> PrivateKey | None:
    """client_private_key_file, relative to the TOML file that names it."""
    key_file = table.text("client_private_key_file")
    if key_file is None:
        return None
    path = Path(table.values.get("_config_dir", ".")) / key_file
    return load_private_key(path, where=f"{table.where}: client_private_key_file")


def _signed_client_secret(
    table: Table, client_id: str, key: PrivateKey | None
) -> Callable[[], str] | None:
    """Apple: sign a fresh client secret per exchange rather than a 6-month one by hand.

    None when the preset takes no signed secret or none of its fields is given (then a
    pre-signed ``client_secret`` is used like any other).
    """
    team_id, key_id = table.text("team_id"), table.text("key_id")
    preset = table.preset
    if preset is None or not preset.signed_client_secret or not (team_id or key_id or key):
        return None
    if team_id is None or key_id is None or key is None:
        raise ConfigError(
            f"{table.where}: team_id, key_id and client_private_key_file (the .p8 key) are "
            "all required to sign the client secret"
        )
    return partial(
        apple_client_secret,
        team_id=team_id,
        key_id=key_id,
        client_id=client_id,
        key=key,
        audience=table.text("issuer") or preset.issuer or "",
        lifetime=_APPLE_SECRET_LIFETIME,
    )
