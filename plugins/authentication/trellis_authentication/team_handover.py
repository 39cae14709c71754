"""What an account's deletion does to teams: its memberships and the invites to its address go, and each
team it was the last owner of is handed over (or, when nobody is left, deleted)."""

from __future__ import annotations

from sqlalchemy import delete, select, update

from trellis import db

from .team_members import direct_roles
from .team_memory import record, record_join
from .team_models import Team, TeamInvite, TeamMember
from .team_tree import delete_subtree, serialise_writes, subtree_ids


def forget_user(user_id: str, email: str | None) -> None:
    """In a user's delete transaction: their memberships (each with a ``leave`` event) and the invites to
    their address go; invites they sent stay, without a sender; the teams they created keep no creator.
    Each team left without an owner is handed over (:func:`_hand_over`)."""
    serialise_writes()
    roles = dict(
        db.session.execute(select(TeamMember.team_id, TeamMember.role).where(TeamMember.user_id == user_id)).all()
    )
    db.session.execute(delete(TeamMember).where(TeamMember.user_id == user_id))
    for team_id in roles:
        record("authentication.team.leave", {"teamId": team_id, "userId": user_id})
    for team_id in sorted(team for team, role in roles.items() if role == "owner"):
        _hand_over(team_id)
    db.session.execute(update(Team).where(Team.created_by == user_id).values(created_by=None))
    if email is not None:
        db.session.execute(delete(TeamInvite).where(TeamInvite.email == email))


def _hand_over(team_id: str) -> None:
    """A team whose last owner is going: its longest-standing direct member becomes owner. With no direct
    member left, a sub-team stays as it is (the owners of the teams above manage it), and a root team goes
    to the longest-standing member of its sub-teams, or, when nobody is left in any of them, is deleted
    with them."""
    found = db.session.execute(select(Team.parent_id).where(Team.id == team_id)).first()
    if found is None or "owner" in direct_roles(team_id).values():  # deleted with a team above; still owned
        return
    heir = _longest_standing([team_id])
    if heir is None and found.parent_id is None:
        heir = _longest_standing(subtree_ids(team_id))
    if heir is not None:
        previous = direct_roles(team_id, [heir]).get(heir)
        if previous is None:
            db.session.add(TeamMember(team_id=team_id, user_id=heir, role="owner", created_at=db.utcnow()))
        else:
            db.session.execute(
                update(TeamMember).where(TeamMember.team_id == team_id, TeamMember.user_id == heir).values(role="owner")
            )
        record_join(team_id, heir, "owner", previous=previous)
    elif found.parent_id is None:
        delete_subtree(team_id)


def _longest_standing(team_ids: list[str]) -> str | None:
    """The member of any of the teams who joined first (ties: the smaller id)."""
    query = select(TeamMember.user_id).where(TeamMember.team_id.in_(team_ids))
    return db.session.execute(query.order_by(TeamMember.created_at, TeamMember.user_id).limit(1)).scalar()
