"""The product's own pages: a home page and an account page that needs a session."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask_login import current_user, login_required

from .extensions import db
from .models import Account, Session, User, utcnow

bp = Blueprint("pages", __name__)


@bp.get("/")
def index() -> str:
    return render_template("index.html", user=current_user)


@bp.get("/account")
@login_required
def account() -> str:
    user = db.session.get(User, current_user.id)
    accounts = db.session.scalars(
        db.select(Account).where(Account.user_id == current_user.id).order_by(Account.id)
    ).all()
    sessions = db.session.scalars(
        db.select(Session)
        .where(Session.user_id == current_user.id, Session.expires > utcnow())
        .order_by(Session.last_active_at.desc())
    ).all()
    return render_template("account.html", user=user, accounts=accounts, sessions=sessions)
