"""People: workspaces, users, server admins, memberships, agent principals and tokens,
and who may manage whom. Mixed into `Authority` (its methods take `self`):
the same object answers "who is this?" and keeps these facts, so every change drops the
caches it answers from at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ulid import ULID

from opennua.protocol.ids import IdKind, prefixed
from opennua.store import (
    AuthStore,
    AutomationStore,
    ExecutionJournal,
    FileStore,
    LogStore,
    MembershipRecord,
    NotFound,
    PrincipalRecord,
    RegistryStore,
    SubscriptionStore,
    TokenRecord,
    WorkspaceRecord,
    WriteConflict,
)

from . import _tokens
from ._policy import Caller, Denied, Permission, Role, allows, may_assign

DEFAULT_WORKSPACE = "default"
DEFAULT_OWNER = "owner"


def _new_id(kind: IdKind, now: float) -> str:
    return prefixed(kind, ULID.from_timestamp(now))


class AuthorityStore(
    LogStore,
    ExecutionJournal,
    FileStore,
    RegistryStore,
    AuthStore,
    AutomationStore,
    SubscriptionStore,
    Protocol,
):
    """What the Authority decides with: who may do what, and the facts a check of a
    session, an execution, an artifact, a deployment, an automation or a subscription
    reads."""


class People:
    if TYPE_CHECKING:  # what `Authority` gives the methods below
        store: AuthorityStore
        _clock: Callable[[], float]

        def check(
            self, caller: Caller, workspace_id: str | None, permission: Permission
        ) -> None: ...

        def forget(self) -> None: ...

        async def _token(self, token_id: str) -> TokenRecord | None: ...

    async def create_workspace(self, caller: Caller, name: str) -> WorkspaceRecord:
        """Any user may open a workspace, and owns it; agent principals may not."""
        if caller.kind != "user":
            raise Denied("insufficient_role", "an agent principal may not create workspaces")
        now = self._clock()
        workspace = WorkspaceRecord(
            workspace_id=_new_id("workspace", now), name=name, created_at=now
        )
        await self.store.create_workspace(workspace)
        await self.store.set_membership(
            MembershipRecord(
                workspace_id=workspace.workspace_id,
                principal_id=caller.principal_id,
                role="owner",
                created_at=now,
            )
        )
        self.forget()
        return workspace

    def require_server_admin(self, caller: Caller) -> None:
        """People are server-wide: creating, disabling and listing all of them is a
        server admin's power (a workspace's admins add existing people as members)."""
        if not caller.server_admin:
            raise Denied("insufficient_role", "only a server admin may do this")

    async def create_user(self, caller: Caller, name: str) -> tuple[PrincipalRecord, str]:
        """`(user, token)`: a new person and their first token (to hand to them; shown
        this once). They see nothing until a workspace admin adds them as a member."""
        self.require_server_admin(caller)
        now = self._clock()
        user = PrincipalRecord(
            principal_id=_new_id("principal", now),
            kind="user",
            name=name,
            created_at=now,
            created_by=caller.principal_id,
        )
        await self.store.create_principal(user)
        token = await self._mint(user.principal_id, "first token", None)
        return user, token

    async def _roles(self, workspace_id: str) -> dict[str, Role]:
        members = await self.store.list_memberships(workspace_id=workspace_id)
        return {m.principal_id: m.role for m in members}

    async def list_users(self, caller: Caller) -> list[PrincipalRecord]:
        """The users a caller may manage: every one, for a server admin; for a workspace
        admin the members of the workspaces they administer, and the users they added
        (who may have no workspace yet). Nobody else's people."""
        if caller.server_admin:
            return await self.store.list_principals("user")
        administered = [w for w, role in caller.roles.items() if allows(role, "manage")]
        if not administered:
            raise Denied("insufficient_role", "only a workspace admin may list users")
        visible: set[str] = set()
        for workspace_id in administered:
            visible |= set(await self._roles(workspace_id))
        users = await self.store.list_principals("user")
        return [
            u for u in users if u.principal_id in visible or u.created_by == caller.principal_id
        ]

    async def set_member(
        self, caller: Caller, workspace_id: str, principal_id: str, role: Role
    ) -> MembershipRecord:
        self.check(caller, workspace_id, "manage")
        if not may_assign(caller.role_in(workspace_id), role):
            raise Denied(
                "insufficient_role", f"a {caller.role_in(workspace_id)} may not grant {role}"
            )
        principal = await self.store.get_principal(principal_id)
        current = {
            m.principal_id: m.role
            for m in await self.store.list_memberships(workspace_id=workspace_id)
        }
        if current.get(principal_id) == "owner" and not allows(caller.role_in(workspace_id), "own"):
            raise Denied("insufficient_role", "only an owner may change an owner's role")
        membership = MembershipRecord(
            workspace_id=workspace_id,
            principal_id=principal.principal_id,
            role=role,
            created_at=self._clock(),
        )
        await self.store.set_membership(membership)
        self.forget()
        return membership

    async def remove_member(self, caller: Caller, workspace_id: str, principal_id: str) -> None:
        self.check(caller, workspace_id, "manage")
        current = {
            m.principal_id: m.role
            for m in await self.store.list_memberships(workspace_id=workspace_id)
        }
        if principal_id not in current:
            raise Denied("not_found", "that principal is not a member of this workspace")
        if current[principal_id] == "owner" and not allows(caller.role_in(workspace_id), "own"):
            raise Denied("insufficient_role", "only an owner may remove an owner")
        await self.store.remove_membership(workspace_id, principal_id)
        self.forget()

    async def create_agent(
        self, caller: Caller, workspace_id: str, name: str, role: Role
    ) -> PrincipalRecord:
        """An independent identity: its own role here, nothing of its creator's."""
        self.check(caller, workspace_id, "manage")
        if not may_assign(caller.role_in(workspace_id), role):
            raise Denied("insufficient_role", f"may not grant {role}")
        now = self._clock()
        agent = PrincipalRecord(
            principal_id=_new_id("principal", now),
            kind="agent",
            name=name,
            workspace_id=workspace_id,
            created_by=caller.principal_id,
            created_at=now,
        )
        membership = MembershipRecord(
            workspace_id=workspace_id, principal_id=agent.principal_id, role=role, created_at=now
        )
        created = await self.store.create_principal(agent, memberships=[membership])
        self.forget()
        return created

    async def managed_agent(self, caller: Caller, principal_id: str) -> PrincipalRecord:
        """An agent principal the caller administers (its home workspace), else `Denied`."""
        try:
            agent = await self.store.get_principal(principal_id)
        except NotFound as exc:
            raise Denied("not_found", "no such principal") from exc
        if agent.kind != "agent":
            raise Denied("not_found", "no such agent principal")
        self.check(caller, agent.workspace_id, "manage")
        return agent

    async def disable_agent(self, caller: Caller, principal_id: str) -> PrincipalRecord:
        agent = await self.managed_agent(caller, principal_id)
        await self.store.disable_principal(agent.principal_id, self._clock())
        self.forget()
        return await self.store.get_principal(agent.principal_id)

    async def list_principals(
        self, caller: Caller, kind: str | None = None
    ) -> list[PrincipalRecord]:
        """Every principal of the server (users and agent principals): a server admin's."""
        self.require_server_admin(caller)
        return await self.store.list_principals(kind)

    async def set_server_admin(
        self, caller: Caller, principal_id: str, admin: bool
    ) -> PrincipalRecord:
        """Make a user a server admin, or no longer one (never the last one)."""
        self.require_server_admin(caller)
        try:
            await self.store.set_server_admin(principal_id, self._clock() if admin else None)
        except NotFound as exc:
            raise Denied("not_found", "no such user") from exc
        except WriteConflict as exc:
            raise Denied("last_server_admin", "the server keeps at least one admin") from exc
        self.forget()
        return await self.store.get_principal(principal_id)

    async def disable_user(self, caller: Caller, principal_id: str) -> PrincipalRecord:
        """Cut a person off everywhere: every token of theirs is refused, and the
        executions that run on their rights end `revoked` (the store's wake-up tells
        every process). Not the last enabled server admin."""
        self.require_server_admin(caller)
        users = await self.store.list_principals("user")
        user = next((u for u in users if u.principal_id == principal_id), None)
        if user is None:
            raise Denied("not_found", "no such user")
        others = [
            u
            for u in users
            if u.admin_since is not None and u.disabled_at is None and u is not user
        ]
        if user.admin_since is not None and not others:
            raise Denied("last_server_admin", "the server keeps at least one enabled admin")
        await self.store.disable_principal(principal_id, self._clock())
        self.forget()
        return await self.store.get_principal(principal_id)

    async def workspace_tokens(
        self, caller: Caller, workspace_id: str
    ) -> list[tuple[TokenRecord, float | None]]:
        """The tokens (ids, never secrets) of a workspace's members, each with when it
        was revoked for this workspace: what its owners and admins may revoke here."""
        self.check(caller, workspace_id, "manage")
        return await self.store.workspace_tokens(workspace_id)

    async def revoke_token_in(
        self, caller: Caller, workspace_id: str, token_id: str
    ) -> tuple[TokenRecord, float]:
        """Revoke a member's token for this workspace's work: it opens nothing here any
        more and what it started here ends `revoked`; the person's other workspaces are
        not this workspace's business. An owner's token takes an owner. Returns the token
        and since when it is revoked here."""
        self.check(caller, workspace_id, "manage")
        found = {t.token_id: (t, at) for t, at in await self.store.workspace_tokens(workspace_id)}
        if token_id not in found:
            raise Denied("not_found", "no token of a member of this workspace has that id")
        record, already = found[token_id]
        roles = await self._roles(workspace_id)
        if roles.get(record.principal_id) == "owner" and not allows(
            caller.role_in(workspace_id), "own"
        ):
            raise Denied("insufficient_role", "only an owner may revoke an owner's token")
        now = self._clock()
        await self.store.revoke_token_in(
            token_id, workspace_id, now, revoked_by=caller.principal_id
        )
        self.forget()
        return record, now if already is None else already

    async def _token_owner(self, caller: Caller, principal_id: str | None) -> str:
        """Whose tokens a caller may handle: their own, or an agent principal's they admin."""
        if principal_id is None or principal_id == caller.principal_id:
            return caller.principal_id
        return (await self.managed_agent(caller, principal_id)).principal_id

    async def create_token(
        self,
        caller: Caller,
        *,
        principal_id: str | None = None,
        name: str | None = None,
        expires_in: float | None = None,
    ) -> tuple[TokenRecord, str]:
        """`(record, token)`: the token itself is returned this once and never again."""
        owner = await self._token_owner(caller, principal_id)
        token = await self._mint(owner, name, expires_in)
        return await self.store.get_token(_tokens.split(token)[0]), token

    async def _mint(self, principal_id: str, name: str | None, expires_in: float | None) -> str:
        now = self._clock()
        token_id = _new_id("token", now)
        token = _tokens.mint(token_id)
        record = TokenRecord(
            token_id=token_id,
            principal_id=principal_id,
            secret_hash=_tokens.secret_hash(_tokens.split(token)[1]),
            name=name,
            created_at=now,
            expires_at=None if expires_in is None else now + expires_in,
        )
        await self.store.create_token(record)
        return token

    async def list_tokens(
        self, caller: Caller, principal_id: str | None = None
    ) -> list[TokenRecord]:
        return await self.store.list_tokens(await self._token_owner(caller, principal_id))

    async def revoke_token(self, caller: Caller, token_id: str) -> TokenRecord:
        """Revoke a token everywhere: the caller's own, an agent principal's they
        administer, or (a server admin) anybody's."""
        record = await self._token(token_id)
        if record is None:
            raise Denied("not_found", "no such token")
        if record.principal_id != caller.principal_id and not caller.server_admin:
            try:
                await self._token_owner(caller, record.principal_id)
            except Denied as exc:
                # Another person's token is nobody else's business, not even its existence.
                raise Denied("not_found", "no such token") from exc
        await self.store.revoke_token(token_id, self._clock())
        self.forget()
        return await self.store.get_token(token_id)

    # -- the zero-setup default -------------------------------------------------------------

    async def bootstrap(self, local_token: str) -> WorkspaceRecord:
        """A fresh data directory gets one workspace and its owner, whose token is the
        local owner token; sessions from before workspaces existed move into it. Runs at
        every start; only the first one (of any process on one database) creates."""
        workspaces = await self.store.list_workspaces()
        if not workspaces:
            now = self._clock()
            workspace = WorkspaceRecord(
                workspace_id=_new_id("workspace", now), name=DEFAULT_WORKSPACE, created_at=now
            )
            owner = PrincipalRecord(
                principal_id=_new_id("principal", now),
                kind="user",
                name=DEFAULT_OWNER,
                created_at=now,
            )
            try:
                await self.store.create_workspace(workspace)
            except WriteConflict:
                workspaces = await self.store.list_workspaces()
            else:
                await self.store.create_principal(
                    owner,
                    memberships=[
                        MembershipRecord(
                            workspace_id=workspace.workspace_id,
                            principal_id=owner.principal_id,
                            role="owner",
                            created_at=now,
                        )
                    ],
                )
                token_id, secret = _tokens.split(local_token)
                await self.store.create_token(
                    TokenRecord(
                        token_id=token_id,
                        principal_id=owner.principal_id,
                        secret_hash=_tokens.secret_hash(secret),
                        name="local owner token",
                        created_at=now,
                    )
                )
                workspaces = [workspace]
        default = workspaces[0]
        owners = [
            m
            for m in await self.store.list_memberships(workspace_id=default.workspace_id)
            if m.role == "owner"
        ]
        if owners:
            await self.store.adopt_orphans(default.workspace_id, owners[0].principal_id)
            users = await self.store.list_principals("user")
            if not any(u.admin_since is not None for u in users):
                # The first owner manages people (also on a data directory from before
                # server admins existed).
                await self.store.set_server_admin(owners[0].principal_id, self._clock())
        self.forget()
        return default
