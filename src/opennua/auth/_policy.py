"""The policy, pure: which role may do what, and whether a grant still holds.

Plain functions over plain records (no store, no clock), so the whole policy can be read
in one screen and tested without a server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from opennua.store import GrantRecord, PrincipalRecord, TokenRecord

Role = Literal["owner", "admin", "member", "viewer"]

#: What a route asks of its caller in the object's workspace.
Permission = Literal["read", "act", "manage", "own"]

ROLES: tuple[Role, ...] = ("viewer", "member", "admin", "owner")
_RANK = {role: rank for rank, role in enumerate(ROLES)}
#: The least role that holds each permission: viewers read; members also create
#: sessions, send, answer and cancel; admins manage members, agent principals and their
#: tokens; owners also make owners.
NEEDS: dict[Permission, Role] = {
    "read": "viewer",
    "act": "member",
    "manage": "admin",
    "own": "owner",
}


class Denied(Exception):
    """A refusal with its problem `code`: `unauthorized`/`token_*` (401), `not_found`
    (404: the object is in a workspace the caller is not in), a 403 code otherwise."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from: a principal, by which token, with which roles."""

    principal_id: str
    kind: Literal["user", "agent"]
    name: str
    token_id: str
    roles: dict[str, Role] = field(default_factory=dict)
    #: A server admin: creates and disables users, sees every principal. Not a role in
    #: any workspace: it opens no workspace's objects by itself.
    server_admin: bool = False

    def role_in(self, workspace_id: str | None) -> Role | None:
        return None if workspace_id is None else self.roles.get(workspace_id)

    @property
    def default_workspace(self) -> str | None:
        """The workspace a request that names none acts in: the first one joined."""
        return next(iter(self.roles), None)


def allows(role: Role | None, permission: Permission) -> bool:
    return role is not None and _RANK[role] >= _RANK[NEEDS[permission]]


def may_assign(granter: Role | None, role: Role) -> bool:
    """Admins hand out roles up to admin; only an owner makes an owner."""
    return allows(granter, "own") or (allows(granter, "manage") and role != "owner")


def token_problem(token: TokenRecord, now: float) -> str | None:
    """Why a token no longer opens anything (`token_revoked`, `token_expired`), or None."""
    if token.revoked_at is not None:
        return "token_revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "token_expired"
    return None


def grant_problem(
    grant: GrantRecord,
    principal: PrincipalRecord | None,
    role: Role | None,
    token: TokenRecord | None,
    now: float,
) -> str | None:
    """Why an execution may not go on under `grant` (its principal's current state, role
    in the grant's workspace and, when a person's token started it, that token), or None.

    An expired grant alone is no reason: expiry only bounds how long a check lasts; the
    supervisor re-checks these facts and renews it."""
    if grant.revoked_at is not None:
        return grant.revoked_reason or "grant_revoked"
    if principal is None or principal.disabled_at is not None:
        return "principal_disabled"
    if not allows(role, "act"):
        return "membership_removed"
    if grant.token_id is not None:
        if token is None:
            return "token_revoked"
        return token_problem(token, now)
    return None
