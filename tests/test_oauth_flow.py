"""OpenID Connect sign-in against a real provider (oidc-provider on loopback), spec §7."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from webapp.extensions import db
from webapp.models import Account, Session, User

from .oauth_support import Browser, error_of, query_of

pytestmark = pytest.mark.e2e


def test_sign_in_creates_user_account_and_session(node_op: Any, make_oauth_app: Any) -> None:
    app = make_oauth_app([node_op.provider_config("op-basic")])
    browser = Browser(app.test_client())
    response = browser.sign_in("op-basic", login_hint="alice")
    assert response.status_code == 302, response.headers
    assert error_of(response) is None
    with app.app_context():
        user = db.session.execute(sa.select(User)).scalar_one()
        account = db.session.execute(sa.select(Account)).scalar_one()
        assert user.email == "alice@example.com"
        assert account.provider_account_id == "alice"
        assert account.access_token and account.id_token and account.refresh_token
