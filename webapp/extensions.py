"""``csrf`` and ``db``, under the import path the first releases documented (``csrf`` is now
exported by ``webapp.auth``)."""

from webapp.storage.db import db  # noqa: F401
from webapp.web.extensions import csrf  # noqa: F401
