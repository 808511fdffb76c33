"""The roles of who may do what (`AuthStore`), sealed secrets and the gateway's facts;
the rest are in `_roles`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from . import _auth as auth
from . import _facts as facts
from . import _secrets as secrets
from ._auth import (
    GrantRecord,
    MembershipRecord,
    PrincipalRecord,
    TokenRecord,
    UsageRow,
    WorkspaceRecord,
)
from ._executions import Execution
from ._facts import AnswerFacts, GrantFacts
from ._roles import Backend
from ._secrets import AuditKind, AuditRecord, GatewayFacts, KeyCheck, Rewrap, SealedSecret
from ._sql import Op
from ._unit import Unit
from ._watch import Watcher


class AuthStore(Backend, Protocol):
    """Who may do what: workspaces, principals, memberships, tokens and grants (what
    `opennua.auth` decides with)."""

    def watch_rights(self) -> Watcher: ...

    async def create_workspace(self, workspace: WorkspaceRecord) -> WorkspaceRecord:
        result: WorkspaceRecord = await self._one(auth.InsertWorkspace(workspace))
        return result

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord:
        return await self._read(auth.get_workspace(workspace_id))

    async def list_workspaces(self) -> list[WorkspaceRecord]:
        return await self._read(auth.list_workspaces())

    async def create_principal(
        self, principal: PrincipalRecord, *, memberships: Sequence[MembershipRecord] = ()
    ) -> PrincipalRecord:
        """A new principal and its first memberships, in one unit."""
        ops: list[Op] = [auth.InsertPrincipal(principal)]
        ops += [auth.SetMembership(m) for m in memberships]
        results = await self._commit(Unit(None, tuple(ops)))
        created: PrincipalRecord = results[0]
        return created

    async def get_principal(self, principal_id: str) -> PrincipalRecord:
        return await self._read(auth.get_principal(principal_id))

    async def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]:
        return await self._read(auth.list_principals(kind))

    async def disable_principal(self, principal_id: str, now: float) -> None:
        await self._one(auth.DisablePrincipal(principal_id, now))
        self._rights_changed(principal_id)

    async def set_server_admin(self, principal_id: str, since: float | None) -> None:
        """Make a user a server admin (since `since`) or, with None, no longer one:
        NotFound for what is not a user, WriteConflict for the last server admin."""
        await self._one(auth.SetServerAdmin(principal_id, since))
        self._rights_changed(principal_id)

    async def set_membership(self, membership: MembershipRecord) -> MembershipRecord:
        result: MembershipRecord = await self._one(auth.SetMembership(membership))
        self._rights_changed(membership.principal_id)
        return result

    async def remove_membership(self, workspace_id: str, principal_id: str) -> bool:
        result: bool = await self._one(auth.RemoveMembership(workspace_id, principal_id))
        if result:
            self._rights_changed(principal_id)
        return result

    async def list_memberships(
        self,
        *,
        workspace_id: str | None = None,
        principal_id: str | None = None,
        opened_by: str | None = None,
    ) -> list[MembershipRecord]:
        """`opened_by`: only the workspaces that token was not revoked for."""
        return await self._read(auth.list_memberships(workspace_id, principal_id, opened_by))

    async def create_token(self, token: TokenRecord) -> TokenRecord:
        result: TokenRecord = await self._one(auth.InsertToken(token))
        return result

    async def get_token(self, token_id: str) -> TokenRecord:
        return await self._read(auth.get_token(token_id))

    async def list_tokens(self, principal_id: str) -> list[TokenRecord]:
        return await self._read(auth.list_tokens(principal_id))

    async def revoke_token(self, token_id: str, now: float) -> None:
        """Revoke a token everywhere (NotFound for an unknown one)."""
        principal_id: str = await self._one(auth.RevokeToken(token_id, now))
        self._rights_changed(principal_id)

    async def revoke_token_in(
        self, token_id: str, workspace_id: str, now: float, *, revoked_by: str | None = None
    ) -> None:
        """Revoke a token for one workspace's work: it opens nothing there any more, and
        grants it started there no longer hold (NotFound for an unknown token)."""
        principal_id: str = await self._one(
            auth.RevokeTokenIn(token_id, workspace_id, now, revoked_by)
        )
        self._rights_changed(principal_id)

    async def workspace_tokens(self, workspace_id: str) -> list[tuple[TokenRecord, float | None]]:
        """The tokens of a workspace's members, each with when it was revoked for it."""
        return await self._read(auth.workspace_tokens(workspace_id))

    async def adopt_orphans(self, workspace_id: str, principal_id: str) -> int:
        """Sessions without a workspace (from before workspaces) join this one."""
        result: int = await self._one(auth.AdoptOrphans(workspace_id, principal_id))
        return result

    async def put_grant(self, grant: GrantRecord) -> GrantRecord:
        result: GrantRecord = await self._one(auth.PutGrant(grant))
        return result

    async def get_grant(self, execution_id: str) -> GrantRecord | None:
        return await self._read(auth.get_grant(execution_id))

    async def grant_facts(self, execution_id: str) -> GrantFacts | None:
        """The grant, its principal, their role in its workspace and its token, or None."""
        return await self._read(facts.grant_facts(execution_id))

    async def answer_facts(self, request_id: str) -> AnswerFacts:
        """An input request, its execution and that execution's `grant_facts`, read in one
        query; NotFound for an unknown request."""
        return await self._read(facts.answer_facts(request_id))

    async def renew_grant(self, execution_id: str, expires_at: float) -> bool:
        result: bool = await self._one(auth.RenewGrant(execution_id, expires_at))
        return result

    async def revoke_grant(self, execution_id: str, now: float, reason: str) -> None:
        await self._one(auth.RevokeGrant(execution_id, now, reason))

    async def unowned_with_grants(
        self, principal_ids: Sequence[str]
    ) -> list[tuple[Execution, GrantFacts | None]]:
        """Queued or parked executions nobody runs whose live grant is one of these
        principals', with the grant's facts (see ``facts.unowned_with_grants``)."""
        return await self._read(facts.unowned_with_grants(list(principal_ids)))

    async def usage(self, workspace_ids: Sequence[str], since: float | None) -> list[UsageRow]:
        return await self._scan(auth.usage_rows(list(workspace_ids), since))


class SealedSecretStore(Backend, Protocol):
    """Sealed secrets and the key check (`opennua.secrets` seals and opens them)."""

    async def put_secret(self, secret: SealedSecret) -> SealedSecret:
        """Insert or replace; a replaced secret keeps its ``created_at``."""
        result: SealedSecret = await self._one(secrets.PutSecret(secret))
        return result

    async def get_secret(self, workspace_id: str, name: str) -> SealedSecret:
        return await self._read(secrets.get_secret(workspace_id, name))

    async def list_secrets(self, workspace_id: str | None = None) -> list[SealedSecret]:
        """A workspace's secrets by name, or (None) every workspace's."""
        return await self._read(secrets.list_secrets(workspace_id))

    async def existing_secrets(self, workspace_id: str, names: Sequence[str]) -> set[str]:
        return await self._read(secrets.secret_names(workspace_id, list(names)))

    async def delete_secret(self, workspace_id: str, name: str) -> bool:
        result: bool = await self._one(secrets.DeleteSecret(workspace_id, name))
        return result

    async def touch_secret(self, workspace_id: str, name: str, now: float) -> None:
        await self._one(secrets.TouchSecret(workspace_id, name, now))

    async def get_key_check(self) -> KeyCheck | None:
        return await self._read(secrets.get_key_check())

    async def init_key_check(self, check: KeyCheck) -> KeyCheck:
        """Record the first key's check unless one exists; the check in force."""
        result: KeyCheck = await self._one(secrets.InitKeyCheck(check))
        return result

    async def rewrap_secrets(
        self, old_key_id: str, check: KeyCheck, secrets: Sequence[SealedSecret]
    ) -> int:
        """Every secret re-sealed and the new key's check, in one unit; WriteConflict if
        the key moved or the secrets changed since they were read."""
        result: int = await self._one(Rewrap(old_key_id, check, tuple(secrets)))
        return result


class GatewayStore(Backend, Protocol):
    """What the gateway checks each call against and records: tickets, facts, audit."""

    async def gateway_facts(
        self, execution_id: str, secret_names: Sequence[str] = ()
    ) -> GatewayFacts:
        """The execution, its grant's facts and the named sealed secrets, in one read:
        the gateway's check of every call (:class:`NotFound` for no such execution)."""
        return await self._read(secrets.gateway_facts(execution_id, list(secret_names)))

    async def put_gateway_ticket(
        self, execution_id: str, epoch: int, secret_hash: str, now: float
    ) -> None:
        """The current attempt's gateway ticket (its hash), replacing an earlier one."""
        await self._one(secrets.PutTicket(execution_id, epoch, secret_hash, now))

    async def get_gateway_ticket(self, execution_id: str) -> tuple[int, str] | None:
        return await self._read(secrets.get_ticket(execution_id))

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Write gateway audit records (an id written twice stays the first)."""
        if records:
            await self._one(secrets.AppendAudit(tuple(records)))

    async def list_audit(
        self,
        *,
        workspace_id: str | None = None,
        execution_id: str | None = None,
        principal_id: str | None = None,
        server: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        kind: AuditKind | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Newest first; every filter given must hold (``since``/``until``: unix seconds
        of ``at``, ``until`` exclusive)."""
        where = secrets.AuditFilter(
            workspace_id=workspace_id,
            execution_id=execution_id,
            principal_id=principal_id,
            server=server,
            tool=tool,
            outcome=outcome,
            kind=kind,
            since=since,
            until=until,
        )
        return await self._read(secrets.list_audit(where, limit))
