"""The app the cluster tests serve (WSGI_APP=tests.support.cluster_app:app): ``webapp.wsgi``'s,
plus the credentials hook an embedding application would register, so that the credentials
throttles can be tried across instances. It accepts the password the tests chose, which
reaches it as AUTH_TEST_PASSWORD (scripts/cluster passes the AUTH_* variables on)."""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping

from webapp import create_app
from webapp.core.hooks import AuthHooks, UserInfo

PASSWORD = os.environ["AUTH_TEST_PASSWORD"]

hooks = AuthHooks()


@hooks.authorize_credentials
def _authorize(form: Mapping[str, str]) -> UserInfo | None:
    if not hmac.compare_digest(form.get("password", "").encode(), PASSWORD.encode()):
        return None
    return UserInfo(email=form["email"], subject=form["email"])


app = create_app(migrations=False, hooks=hooks)
