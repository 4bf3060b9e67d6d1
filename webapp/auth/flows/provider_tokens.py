"""``provider_access_token``, under the import path the first releases documented (now
exported by ``webapp.auth``)."""

from webapp.flows.provider_tokens import provider_access_token  # noqa: F401
