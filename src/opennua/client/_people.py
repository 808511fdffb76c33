"""Who is who, over the HTTP API (docs/auth.md): the caller, workspaces, users, server
admins, memberships, agent principals and tokens. The server decides who may do what."""

from __future__ import annotations

from typing import Any, Literal

from ._api import Api, segment
from .responses import (
    MemberDoc,
    MemberTokenDoc,
    PrincipalDoc,
    TokenCreated,
    TokenDoc,
    UserCreated,
    WhoAmI,
    WorkspaceDoc,
)

Role = Literal["owner", "admin", "member", "viewer"]


class PeopleApi(Api):
    async def whoami(self) -> WhoAmI:
        """Who the token in use stands for, and their role in each workspace."""
        me: WhoAmI = await self._json("GET", "/v1/whoami")
        return me

    async def workspaces(self) -> list[WorkspaceDoc]:
        """The workspaces the caller is a member of, with their role."""
        items: list[WorkspaceDoc] = (await self._json("GET", "/v1/workspaces"))["items"]
        return items

    async def create_workspace(self, name: str) -> WorkspaceDoc:
        """A new workspace; the caller is its owner."""
        created: WorkspaceDoc = await self._json("POST", "/v1/workspaces", json={"name": name})
        return created

    async def add_user(self, name: str) -> UserCreated:
        """A new person (server admins), with their first token, returned this once."""
        created: UserCreated = await self._json("POST", "/v1/users", json={"name": name})
        return created

    async def users(self) -> list[PrincipalDoc]:
        """The users the caller manages."""
        items: list[PrincipalDoc] = (await self._json("GET", "/v1/users"))["items"]
        return items

    async def disable_user(self, principal_id: str) -> PrincipalDoc:
        """Cut a person off everywhere (server admins)."""
        path = f"/v1/users/{segment(principal_id)}/disable"
        disabled: PrincipalDoc = await self._json("POST", path)
        return disabled

    async def grant_admin(self, principal_id: str) -> PrincipalDoc:
        """Make a user a server admin."""
        user: PrincipalDoc = await self._json("PUT", f"/v1/admins/{segment(principal_id)}")
        return user

    async def revoke_admin(self, principal_id: str) -> PrincipalDoc:
        """A server admin no longer (the last one stays: 409)."""
        user: PrincipalDoc = await self._json("DELETE", f"/v1/admins/{segment(principal_id)}")
        return user

    async def principals(self, kind: Literal["user", "agent"] | None = None) -> list[PrincipalDoc]:
        """Every principal of the server (server admins), of one kind if given."""
        params = {"kind": kind} if kind else None
        items: list[PrincipalDoc] = (await self._json("GET", "/v1/principals", params=params))[
            "items"
        ]
        return items

    async def set_member(self, workspace_id: str, principal_id: str, role: Role) -> MemberDoc:
        """Give a principal a role in a workspace (or change it)."""
        path = f"/v1/workspaces/{segment(workspace_id)}/members/{segment(principal_id)}"
        member: MemberDoc = await self._json("PUT", path, json={"role": role})
        return member

    async def remove_member(self, workspace_id: str, principal_id: str) -> None:
        """Remove a principal from a workspace: its executions there end `revoked`."""
        path = f"/v1/workspaces/{segment(workspace_id)}/members/{segment(principal_id)}"
        await self.request("DELETE", path)

    async def members(self, workspace_id: str) -> list[MemberDoc]:
        """The members of a workspace and their roles."""
        path = f"/v1/workspaces/{segment(workspace_id)}/members"
        items: list[MemberDoc] = (await self._json("GET", path))["items"]
        return items

    async def create_agent_principal(
        self, workspace_id: str, name: str, role: Role = "member"
    ) -> PrincipalDoc:
        """An agent principal with its own role in `workspace_id`."""
        path = f"/v1/workspaces/{segment(workspace_id)}/agent-principals"
        agent: PrincipalDoc = await self._json("POST", path, json={"name": name, "role": role})
        return agent

    async def disable_agent_principal(self, principal_id: str) -> PrincipalDoc:
        """Its tokens stop working, its executions end `revoked`."""
        path = f"/v1/agent-principals/{segment(principal_id)}/disable"
        agent: PrincipalDoc = await self._json("POST", path)
        return agent

    async def create_token(
        self,
        *,
        principal_id: str | None = None,
        name: str | None = None,
        expires_in: int | None = None,
    ) -> TokenCreated:
        """A token for the caller or an agent principal it administers; its secret is
        returned this once."""
        body: dict[str, Any] = {"principal_id": principal_id, "name": name}
        body["expires_in"] = expires_in
        created: TokenCreated = await self._json("POST", "/v1/tokens", json=body)
        return created

    async def tokens(self, principal_id: str | None = None) -> list[TokenDoc]:
        """Tokens (never secrets): the caller's, or an agent principal's."""
        params = {"principal_id": principal_id} if principal_id else None
        items: list[TokenDoc] = (await self._json("GET", "/v1/tokens", params=params))["items"]
        return items

    async def member_tokens(self, workspace_id: str) -> list[MemberTokenDoc]:
        """The tokens of a workspace's members (its admins)."""
        path = f"/v1/workspaces/{segment(workspace_id)}/tokens"
        items: list[MemberTokenDoc] = (await self._json("GET", path))["items"]
        return items

    async def revoke_token(self, token_id: str) -> TokenDoc:
        """Revoke a token at once."""
        revoked: TokenDoc = await self._json("DELETE", f"/v1/tokens/{segment(token_id)}")
        return revoked

    async def revoke_member_token(self, workspace_id: str, token_id: str) -> MemberTokenDoc:
        """Revoke a member's token for one workspace's work only."""
        path = f"/v1/workspaces/{segment(workspace_id)}/tokens/{segment(token_id)}"
        revoked: MemberTokenDoc = await self._json("DELETE", path)
        return revoked
