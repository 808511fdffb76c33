"""Writes and reads of who may do what: workspaces, principals, memberships, API tokens
and execution grants. The store keeps these facts; `opennua.auth` decides with them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ._actions import EncodedAction, action_from_row
from ._errors import NotFound, WriteConflict
from ._executions import EXEC_COLS, Execution, unknown_if_started
from ._json import dumps, loads
from ._log import append_to_request_session
from ._sql import Columns, Dialect, Effects, Op, Program, Query, Where

# -- records -------------------------------------------------------------------------


Role = Literal["owner", "admin", "member", "viewer"]


PrincipalKind = Literal["user", "agent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceRecord:
    workspace_id: str
    name: str
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PrincipalRecord:
    principal_id: str
    kind: PrincipalKind
    name: str
    created_at: float
    #: An agent principal's home workspace; None for a user.
    workspace_id: str | None = None
    created_by: str | None = None
    disabled_at: float | None = None
    #: Since when this user is a server admin (creates and disables users, sees every
    #: principal); None: not one.
    admin_since: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipRecord:
    workspace_id: str
    principal_id: str
    role: Role
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    token_id: str
    principal_id: str
    #: sha256 of the secret, hex. The secret is never stored.
    secret_hash: str
    created_at: float
    name: str | None = None
    expires_at: float | None = None
    revoked_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantRecord:
    """What one execution may do, and until when (renewed with its lease)."""

    execution_id: str
    principal_id: str
    workspace_id: str
    expires_at: float
    token_id: str | None = None
    snapshot_digest: str | None = None
    model: str | None = None
    caps: dict[str, Any] | None = None
    revoked_at: float | None = None
    revoked_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    """One `usage.recorded` action with what it is attributed to."""

    workspace_id: str | None
    principal_id: str | None
    model: str
    ts: str
    tokens: dict[str, int]
    #: The deployment the session runs (None: sessions from before deployments).
    deployment: str | None = None


# -- row mapping ---------------------------------------------------------------------

_WORKSPACE_COLS = Columns(WorkspaceRecord)
PRINCIPAL_COLS = Columns(PrincipalRecord)
_MEMBERSHIP_COLS = Columns(MembershipRecord)
TOKEN_COLS = Columns(TokenRecord)
GRANT_COLS = Columns(GrantRecord, decode={"caps": loads})
_USAGE_KINDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


# -- writes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertWorkspace(Op):
    workspace: WorkspaceRecord

    def run(self, d: Dialect, fx: Effects) -> Program[WorkspaceRecord]:
        w = self.workspace
        exists = WriteConflict("workspace", w.name, "already exists")
        return (yield from _WORKSPACE_COLS.insert_new("workspaces", w, exists))


@dataclass(frozen=True, slots=True)
class InsertPrincipal(Op):
    principal: PrincipalRecord

    def run(self, d: Dialect, fx: Effects) -> Program[PrincipalRecord]:
        p = self.principal
        exists = WriteConflict("principal", p.name, "already exists")
        return (yield from PRINCIPAL_COLS.insert_new("principals", p, exists))


@dataclass(frozen=True, slots=True)
class DisablePrincipal(Op):
    principal_id: str
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE principals SET disabled_at = COALESCE(disabled_at, ?) "
            "WHERE principal_id = ? RETURNING principal_id",
            (self.now, self.principal_id),
        )
        if not rows:
            raise NotFound("principal", self.principal_id)
        yield from d.rights_changed(self.principal_id)


@dataclass(frozen=True, slots=True)
class SetMembership(Op):
    membership: MembershipRecord

    def run(self, d: Dialect, fx: Effects) -> Program[MembershipRecord]:
        m = self.membership
        yield Query(
            f"INSERT INTO memberships ({_MEMBERSHIP_COLS}) VALUES ({_MEMBERSHIP_COLS.marks}) "
            "ON CONFLICT (workspace_id, principal_id) DO UPDATE SET role = excluded.role",
            _MEMBERSHIP_COLS.values(m),
        )
        # A new role may be a lower one: what the principal does there is judged again.
        yield from d.rights_changed(m.principal_id)
        return m


@dataclass(frozen=True, slots=True)
class RemoveMembership(Op):
    workspace_id: str
    principal_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            "DELETE FROM memberships WHERE workspace_id = ? AND principal_id = ? "
            "RETURNING principal_id",
            (self.workspace_id, self.principal_id),
        )
        if rows:
            yield from d.rights_changed(self.principal_id)
        return bool(rows)


@dataclass(frozen=True, slots=True)
class InsertToken(Op):
    token: TokenRecord

    def run(self, d: Dialect, fx: Effects) -> Program[TokenRecord]:
        t = self.token
        exists = WriteConflict("token", t.token_id, "already exists")
        return (yield from TOKEN_COLS.insert_new("api_tokens", t, exists))


@dataclass(frozen=True, slots=True)
class RevokeToken(Op):
    """Revoke a token everywhere; its principal's id."""

    token_id: str
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[str]:
        rows = yield Query(
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) "
            "WHERE token_id = ? RETURNING principal_id",
            (self.now, self.token_id),
        )
        if not rows:
            raise NotFound("token", self.token_id)
        principal_id: str = rows[0][0]
        yield from d.rights_changed(principal_id)
        return principal_id


@dataclass(frozen=True, slots=True)
class RevokeTokenIn(Op):
    """Revoke a token for one workspace's work only (kept when already revoked there);
    its principal's id."""

    token_id: str
    workspace_id: str
    now: float
    revoked_by: str | None

    def run(self, d: Dialect, fx: Effects) -> Program[str]:
        rows = yield Query(
            "SELECT principal_id FROM api_tokens WHERE token_id = ?", (self.token_id,)
        )
        if not rows:
            raise NotFound("token", self.token_id)
        yield Query(
            "INSERT INTO token_workspace_revocations (token_id, workspace_id, revoked_at, "
            "revoked_by) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (self.token_id, self.workspace_id, self.now, self.revoked_by),
        )
        principal_id: str = rows[0][0]
        yield from d.rights_changed(principal_id)
        return principal_id


@dataclass(frozen=True, slots=True)
class SetServerAdmin(Op):
    """Make a user a server admin (`since`), or no longer one (None). The last enabled
    server admin stays one (`WriteConflict`): somebody must be able to manage people."""

    principal_id: str
    since: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        if self.since is None:
            # Locked, so that two admins removing each other at once cannot both succeed.
            admins = yield Query(
                "SELECT principal_id FROM principals WHERE admin_since IS NOT NULL "
                f"AND disabled_at IS NULL{d.lock_row}"
            )
            if [r[0] for r in admins] == [self.principal_id]:
                raise WriteConflict("server admin", self.principal_id, "is the last server admin")
        value, params = (
            ("NULL", ()) if self.since is None else ("COALESCE(admin_since, ?)", (self.since,))
        )
        rows = yield Query(
            f"UPDATE principals SET admin_since = {value} WHERE principal_id = ? "
            "AND kind = 'user' RETURNING principal_id",
            (*params, self.principal_id),
        )
        if not rows:
            raise NotFound("user", self.principal_id)
        yield from d.rights_changed(self.principal_id)


@dataclass(frozen=True, slots=True)
class AdoptOrphans(Op):
    """Sessions from before workspaces existed join `workspace_id`, run by `principal_id`."""

    workspace_id: str
    principal_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[int]:
        rows = yield Query(
            "UPDATE sessions SET workspace_id = ?, principal_id = COALESCE(principal_id, ?) "
            "WHERE workspace_id IS NULL RETURNING session_id",
            (self.workspace_id, self.principal_id),
        )
        return len(rows)


@dataclass(frozen=True, slots=True)
class PutGrant(Op):
    grant: GrantRecord

    def run(self, d: Dialect, fx: Effects) -> Program[GrantRecord]:
        g = self.grant
        yield Query(
            f"INSERT INTO execution_grants ({GRANT_COLS}) VALUES ({GRANT_COLS.marks}) "
            "ON CONFLICT (execution_id) DO NOTHING",
            GRANT_COLS.values(g, caps=None if g.caps is None else dumps(g.caps, "a grant's caps")),
        )
        return g


@dataclass(frozen=True, slots=True)
class RenewGrant(Op):
    """Move a live grant's expiry on (never back); False if it is revoked or gone."""

    execution_id: str
    expires_at: float

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            "UPDATE execution_grants SET expires_at = CASE WHEN expires_at < ? THEN ? "
            "ELSE expires_at END WHERE execution_id = ? AND revoked_at IS NULL "
            "RETURNING execution_id",
            (self.expires_at, self.expires_at, self.execution_id),
        )
        return bool(rows)


@dataclass(frozen=True, slots=True)
class RevokeGrant(Op):
    execution_id: str
    now: float
    reason: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE execution_grants SET revoked_at = ?, revoked_reason = ? "
            "WHERE execution_id = ? AND revoked_at IS NULL",
            (self.now, self.reason, self.execution_id),
        )


@dataclass(frozen=True, slots=True)
class EndUnowned(Op):
    """End an execution nobody runs (parked for input, or queued) with `status`: its open
    input requests close and `actions` (its `turn.ended`) append, in this one unit. None
    if it was running or already over (its runner, if any, ends it instead).
    `request_status`: what its open requests become (`cancelled`, or `expired`)."""

    execution_id: str
    status: str
    error: Any
    now: float
    actions: tuple[EncodedAction, ...]
    request_status: str = "cancelled"

    def run(self, d: Dialect, fx: Effects) -> Program[Execution | None]:
        rows = yield Query(
            "UPDATE executions SET status = ?, error = ?, finished_at = ? "
            "WHERE execution_id = ? AND status IN ('waiting_input', 'queued') "
            f"AND owner IS NULL RETURNING {EXEC_COLS}",
            (
                self.status,
                None if self.error is None else dumps(self.error, "an execution's error"),
                self.now,
                self.execution_id,
            ),
        )
        if not rows:
            return None
        ended = EXEC_COLS.read(rows[0])
        yield Query(
            "UPDATE input_requests SET status = ?, resolved_at = ? "
            "WHERE execution_id = ? AND status = 'open'",
            (self.request_status, self.now, self.execution_id),
        )
        yield unknown_if_started(self.execution_id, self.now)
        yield from append_to_request_session(d, ended.session_id, self.actions, fx)
        return ended


# -- reads -----------------------------------------------------------------------------


def get_workspace(workspace_id: str) -> Program[WorkspaceRecord]:
    rows = yield Query(
        f"SELECT {_WORKSPACE_COLS} FROM workspaces WHERE workspace_id = ?", (workspace_id,)
    )
    return _WORKSPACE_COLS.one(rows, "workspace", workspace_id)


def list_workspaces() -> Program[list[WorkspaceRecord]]:
    rows = yield Query(f"SELECT {_WORKSPACE_COLS} FROM workspaces ORDER BY created_at")
    return [_WORKSPACE_COLS.read(r) for r in rows]


def get_principal(principal_id: str) -> Program[PrincipalRecord]:
    rows = yield Query(
        f"SELECT {PRINCIPAL_COLS} FROM principals WHERE principal_id = ?", (principal_id,)
    )
    return PRINCIPAL_COLS.one(rows, "principal", principal_id)


def list_principals(kind: str | None) -> Program[list[PrincipalRecord]]:
    where, params = ("WHERE kind = ? ", (kind,)) if kind else ("", ())
    rows = yield Query(
        f"SELECT {PRINCIPAL_COLS} FROM principals {where}ORDER BY created_at, principal_id",
        params,
    )
    return [PRINCIPAL_COLS.read(r) for r in rows]


def list_memberships(
    workspace_id: str | None, principal_id: str | None, opened_by: str | None = None
) -> Program[list[MembershipRecord]]:
    where = Where()
    where.equal("workspace_id", workspace_id)
    where.equal("principal_id", principal_id)
    if opened_by is not None:
        where.add(
            "NOT EXISTS (SELECT 1 FROM token_workspace_revocations r WHERE r.token_id = ? "
            "AND r.workspace_id = memberships.workspace_id)",
            opened_by,
        )
    rows = yield Query(
        f"SELECT {_MEMBERSHIP_COLS} FROM memberships "
        f"{where}ORDER BY created_at, workspace_id, principal_id",
        where.params,
    )
    return [_MEMBERSHIP_COLS.read(r) for r in rows]


def get_token(token_id: str) -> Program[TokenRecord]:
    rows = yield Query(f"SELECT {TOKEN_COLS} FROM api_tokens WHERE token_id = ?", (token_id,))
    return TOKEN_COLS.one(rows, "token", token_id)


def workspace_tokens(workspace_id: str) -> Program[list[tuple[TokenRecord, float | None]]]:
    """The tokens of a workspace's members, each with when it was revoked for this
    workspace (None: it still opens it)."""
    rows = yield Query(
        f"SELECT {TOKEN_COLS.of('t')}, r.revoked_at FROM api_tokens t "
        "JOIN memberships m ON m.principal_id = t.principal_id "
        "LEFT JOIN token_workspace_revocations r ON r.token_id = t.token_id "
        "AND r.workspace_id = m.workspace_id WHERE m.workspace_id = ? "
        "ORDER BY t.created_at, t.token_id",
        (workspace_id,),
    )
    return [(TOKEN_COLS.read(r[:-1]), r[-1]) for r in rows]


def list_tokens(principal_id: str) -> Program[list[TokenRecord]]:
    rows = yield Query(
        f"SELECT {TOKEN_COLS} FROM api_tokens WHERE principal_id = ? ORDER BY created_at",
        (principal_id,),
    )
    return [TOKEN_COLS.read(r) for r in rows]


def get_grant(execution_id: str) -> Program[GrantRecord | None]:
    rows = yield Query(
        f"SELECT {GRANT_COLS} FROM execution_grants WHERE execution_id = ?", (execution_id,)
    )
    return GRANT_COLS.read(rows[0]) if rows else None


def usage_rows(workspace_ids: list[str], since: float | None) -> Program[list[UsageRow]]:
    """Every `usage.recorded` of sessions in these workspaces, attributed to the principal
    of the execution whose turn recorded it (the execution principal pays)."""
    if not workspace_ids:
        return []
    marks = ",".join("?" * len(workspace_ids))
    rows = yield Query(
        "SELECT s.workspace_id, a.session_id, a.action_id, a.type, a.body, s.deployment "
        "FROM actions a JOIN sessions s "
        f"ON s.session_id = a.session_id WHERE a.type = 'usage.recorded' "
        f"AND s.workspace_id IN ({marks})",
        list(workspace_ids),
    )
    executions = yield Query(
        "SELECT e.turn_id, e.principal_id FROM executions e JOIN sessions s "
        f"ON s.session_id = e.session_id WHERE s.workspace_id IN ({marks})",
        list(workspace_ids),
    )
    principal_of = {r[0]: r[1] for r in executions}
    out = []
    for workspace_id, session_id, action_id, kind, body, deployment in rows:
        action = action_from_row(session_id, action_id, kind, body)
        data = action.get("data") or {}
        stamp = str(action.get("ts") or "")
        out.append(
            UsageRow(
                workspace_id=workspace_id,
                principal_id=principal_of.get(action.get("turn_id")),
                model=f"{data.get('provider', '')}:{data.get('model', '')}",
                ts=stamp,
                tokens={k: int(data.get(k) or 0) for k in _USAGE_KINDS},
                deployment=deployment,
            )
        )
    if since is not None:
        cut = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        out = [u for u in out if u.ts >= cut]
    return out
