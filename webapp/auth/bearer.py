"""``bearer_identity``, under the import path the first releases documented (now exported by
``webapp.auth``)."""

from webapp.web.bearer import bearer_identity  # noqa: F401
