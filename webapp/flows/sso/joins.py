"""Joining an existing user to a provider declared for their e-mail domain: the first time
someone signs in through it with a verified address another user owns, the new account
joins that user (``flows.signin.identity``), once per user and provider. The operator lists
and undoes joins (``flask auth sso``); an undone join keeps its row, so it is not made
again by itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import delete, select

from webapp.audit import trail
from webapp.core.clock import utcnow
from webapp.flows.sso import routing
from webapp.providers import providers
from webapp.storage.db import db
from webapp.storage.models import Account, Session, SsoJoin, User


def may_join(provider_id: str, owner: User, address: str) -> bool:
    """Whether a new account at ``provider_id`` joins ``owner``, whose verified address
    ``address`` is: its domain belongs to the provider, which never joined them before."""
    provider = providers().get(provider_id)
    if provider is None or not routing.belongs_to(address, provider):
        return False
    earlier = db.session.execute(
        select(SsoJoin.id).where(SsoJoin.user_id == owner.id, SsoJoin.provider == provider_id)
    ).first()
    return earlier is None


def record_join(account: Account, address: str) -> None:
    """Write the join that made ``account`` (in the sign-in's savepoint)."""
    db.session.add(
        SsoJoin(
            user_id=account.user_id, provider=account.provider, email=address, account_id=account.id
        )
    )
    db.session.flush()


def list_joins() -> list[SsoJoin]:
    """Every join, the newest first."""
    return list(
        db.session.scalars(select(SsoJoin).order_by(SsoJoin.joined_at.desc(), SsoJoin.id.desc()))
    )


class JoinNotFound(LookupError):
    """No join with that id that is not undone already."""


@dataclass(frozen=True)
class UndoneJoin:
    join: SsoJoin
    account_removed: bool
    sessions_ended: int


def undo_join(join_id: int) -> UndoneJoin:
    """Remove the account a join made and the sessions its provider started for that user;
    mark the join undone. Raises ``JoinNotFound``. The caller commits."""
    join = db.session.execute(
        select(SsoJoin).where(SsoJoin.id == join_id, SsoJoin.undone_at.is_(None)).with_for_update()
    ).scalar_one_or_none()
    if join is None:
        raise JoinNotFound(join_id)
    removed = db.session.execute(
        delete(Account).where(Account.id == join.account_id).returning(Account.id)
    ).first()
    ended = db.session.scalars(
        delete(Session)
        .where(Session.user_id == join.user_id, Session.provider == join.provider)
        .returning(Session.user_id)
    ).all()
    join.undone_at = utcnow()
    join.account_id = None
    trail.record(
        trail.Event.ACCOUNT_UNLINKED,
        user_id=join.user_id,
        provider=join.provider,
        detail={"by": trail.OPERATOR, "join": join.id},
    )
    for user_id, count in Counter(ended).items():
        trail.record(
            trail.Event.SESSION_REVOKED,
            user_id=user_id,
            detail={"reason": trail.OPERATOR, "sessions": count},
        )
    return UndoneJoin(join, account_removed=removed is not None, sessions_ended=len(ended))
