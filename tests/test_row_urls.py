"""``row_url`` (webapp/ui/row_urls.py): the URL ``url_for`` builds, for every row."""

from __future__ import annotations

import pytest
from flask import Flask, url_for
from werkzeug.routing import BuildError

from webapp.ui.row_urls import row_url

ROUTES = [
    ("account.end_session", "session_id"),
    ("account.rename_passkey", "passkey_id"),
    ("account.remove_passkey", "passkey_id"),
    ("account.unlink", "account_id"),
]


@pytest.mark.parametrize(("endpoint", "param"), ROUTES)
def test_a_row_url_is_the_one_url_for_builds(app: Flask, endpoint: str, param: str) -> None:
    with app.test_request_context("/account"):
        url = row_url(endpoint, param)
        for value in (1, 7, 42, 10**12, 2**63 - 1):
            assert url(value) == url_for(endpoint, **{param: value})
        assert url(7).endswith("/7/" + endpoint.rsplit(".", 1)[1].split("_")[0])


def test_a_value_other_than_an_int_is_left_to_url_for(app: Flask) -> None:
    with app.test_request_context("/account"):
        url = row_url("account.end_session", "session_id")
        assert url("12") == url_for("account.end_session", session_id="12")
        # url_for writes True as the int converter does ("1"); a plain f-string would not.
        assert url(True) == url_for("account.end_session", session_id=True)
        assert "True" not in url(True)
        with pytest.raises(BuildError):
            url(None)
