"""``current_session``, under the import path the first releases documented (now exported by
``webapp.auth``)."""

from webapp.sessions.store import current_session  # noqa: F401
