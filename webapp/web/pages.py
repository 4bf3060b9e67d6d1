"""The product's own pages: the home page. (The account area is ``account_routes``.)"""

from __future__ import annotations

from flask import Blueprint, render_template
from flask_login import current_user

bp = Blueprint("pages", __name__)


@bp.get("/")
def index() -> str:
    return render_template("index.html", user=current_user)
