"""Sealed secrets and the gateway's audit records (docs/secrets.md, docs/gateway.md).

The store keeps secrets only as `opennua.secrets` sealed them: it never sees a value and
has no way to open one. Rotation rewrites every row and the key check in one unit, and
only if the key check still names the key the caller rotated from (two concurrent
rotations cannot leave rows under two keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from . import _facts as facts
from ._errors import NotFound, WriteConflict
from ._executions import Execution
from ._sql import Columns, Dialect, Effects, Op, Program, Query, Where


@dataclass(frozen=True, slots=True, kw_only=True)
class SealedSecret:
    """One secret as stored: ``sealed`` is base64(nonce || AES-GCM ciphertext and tag)."""

    workspace_id: str
    name: str
    sealed: str
    key_id: str
    created_at: float
    updated_at: float
    last_used_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyCheck:
    """A known value sealed under the current key: proves a key right before it is used."""

    key_id: str
    sealed: str
    created_at: float


#: What an audit record is of: a call to a tool (MCP) or a connection through the egress proxy.
AuditKind = Literal["tool_call", "egress"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One call the gateway answered. ``credential`` is a secret's *name*, never a value."""

    audit_id: str
    at: float
    server: str
    outcome: str
    latency_ms: float
    workspace_id: str | None = None
    principal_id: str | None = None
    execution_id: str | None = None
    tool: str | None = None
    host: str | None = None
    credential: str | None = None
    code: str | None = None
    #: An egress proxy connection's (server "egress"): the port, and the bytes each way.
    port: int | None = None
    bytes_up: int | None = None
    bytes_down: int | None = None

    @property
    def kind(self) -> AuditKind:
        """An egress proxy connection's record always counts bytes; a tool call's never
        does (its server may be any name a plugin chose, "egress" included)."""
        return "tool_call" if self.bytes_up is None else "egress"


_SECRET_COLS = Columns(SealedSecret)
_AUDIT_COLS = Columns(AuditRecord)
_KEY_CHECK_COLS = Columns(KeyCheck)


# -- writes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutSecret(Op):
    """Insert or replace a secret's value; a replaced one keeps its creation time."""

    secret: SealedSecret

    def run(self, d: Dialect, fx: Effects) -> Program[SealedSecret]:
        s = self.secret
        rows = yield Query(
            f"INSERT INTO secrets ({_SECRET_COLS}) VALUES ({_SECRET_COLS.marks}) "
            "ON CONFLICT (workspace_id, name) DO UPDATE SET sealed = excluded.sealed, "
            "key_id = excluded.key_id, updated_at = excluded.updated_at "
            f"RETURNING {_SECRET_COLS}",
            _SECRET_COLS.values(s, last_used_at=None),
        )
        return _SECRET_COLS.read(rows[0])


@dataclass(frozen=True, slots=True)
class DeleteSecret(Op):
    workspace_id: str
    name: str

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            "DELETE FROM secrets WHERE workspace_id = ? AND name = ? RETURNING name",
            (self.workspace_id, self.name),
        )
        return bool(rows)


@dataclass(frozen=True, slots=True)
class TouchSecret(Op):
    workspace_id: str
    name: str
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE secrets SET last_used_at = ? WHERE workspace_id = ? AND name = ?",
            (self.now, self.workspace_id, self.name),
        )


@dataclass(frozen=True, slots=True)
class InitKeyCheck(Op):
    """Record the first key's check value; a store that has one keeps it. The check in
    force is returned either way (two first starts agree on one key)."""

    check: KeyCheck

    def run(self, d: Dialect, fx: Effects) -> Program[KeyCheck]:
        c = self.check
        yield Query(
            "INSERT INTO secret_key_check (id, key_id, sealed, created_at) VALUES (1, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (c.key_id, c.sealed, c.created_at),
        )
        rows = yield Query(f"SELECT {_KEY_CHECK_COLS} FROM secret_key_check WHERE id = 1")
        return _KEY_CHECK_COLS.read(rows[0])


@dataclass(frozen=True, slots=True)
class Rewrap(Op):
    """Replace every secret (re-sealed under a new key) and the key check, only if the
    check still names ``old_key_id`` and the rows are exactly those that were read."""

    old_key_id: str
    check: KeyCheck
    secrets: tuple[SealedSecret, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[int]:
        c = self.check
        rows = yield Query(
            "UPDATE secret_key_check SET key_id = ?, sealed = ?, created_at = ? "
            "WHERE id = 1 AND key_id = ? RETURNING id",
            (c.key_id, c.sealed, c.created_at, self.old_key_id),
        )
        if not rows:
            raise WriteConflict("secret key", self.old_key_id, "is no longer the current key")
        count = yield Query("SELECT count(*) FROM secrets")
        if count[0][0] != len(self.secrets):
            raise WriteConflict("secrets", "*", "changed while the key was being rotated")
        for s in self.secrets:
            moved = yield Query(
                "UPDATE secrets SET sealed = ?, key_id = ? WHERE workspace_id = ? AND name = ? "
                "AND key_id = ? RETURNING name",
                (s.sealed, c.key_id, s.workspace_id, s.name, self.old_key_id),
            )
            if not moved:
                raise WriteConflict("secret", s.name, "changed while the key was being rotated")
        return len(self.secrets)


@dataclass(frozen=True, slots=True)
class AppendAudit(Op):
    """Many records in one statement: the gateway writes its audit in batches, so a
    call does not wait for a commit of its own."""

    records: tuple[AuditRecord, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            f"INSERT INTO gateway_audit ({_AUDIT_COLS}) VALUES ({_AUDIT_COLS.marks}) "
            "ON CONFLICT (audit_id) DO NOTHING",
            [_AUDIT_COLS.values(a) for a in self.records],
            many=True,
        )


@dataclass(frozen=True, slots=True)
class PutTicket(Op):
    execution_id: str
    epoch: int
    secret_hash: str
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "INSERT INTO gateway_tickets (execution_id, epoch, secret_hash, created_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (execution_id) DO UPDATE SET "
            "epoch = excluded.epoch, secret_hash = excluded.secret_hash, "
            "created_at = excluded.created_at",
            (self.execution_id, self.epoch, self.secret_hash, self.now),
        )


# -- reads -----------------------------------------------------------------------------


def get_secret(workspace_id: str, name: str) -> Program[SealedSecret]:
    rows = yield Query(
        f"SELECT {_SECRET_COLS} FROM secrets WHERE workspace_id = ? AND name = ?",
        (workspace_id, name),
    )
    return _SECRET_COLS.one(rows, "secret", name)


def list_secrets(workspace_id: str | None) -> Program[list[SealedSecret]]:
    where, params = ("WHERE workspace_id = ? ", (workspace_id,)) if workspace_id else ("", ())
    rows = yield Query(
        f"SELECT {_SECRET_COLS} FROM secrets {where}ORDER BY workspace_id, name", params
    )
    return [_SECRET_COLS.read(r) for r in rows]


def get_key_check() -> Program[KeyCheck | None]:
    rows = yield Query(f"SELECT {_KEY_CHECK_COLS} FROM secret_key_check WHERE id = 1")
    return _KEY_CHECK_COLS.read(rows[0]) if rows else None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditFilter:
    """Which audit records a listing shows (every given field must hold); ``since`` and
    ``until`` bound ``at`` (unix seconds, ``until`` exclusive)."""

    workspace_id: str | None = None
    execution_id: str | None = None
    principal_id: str | None = None
    server: str | None = None
    tool: str | None = None
    outcome: str | None = None
    kind: AuditKind | None = None
    since: float | None = None
    until: float | None = None


_AUDIT_EQUAL = ("workspace_id", "execution_id", "principal_id", "server", "tool", "outcome")


def list_audit(f: AuditFilter, limit: int) -> Program[list[AuditRecord]]:
    where = Where()
    for column in _AUDIT_EQUAL:
        where.equal(column, getattr(f, column))
    if f.kind is not None:  # as `AuditRecord.kind` tells them apart
        where.add(f"bytes_up IS {'NOT ' if f.kind == 'egress' else ''}NULL")
    if f.since is not None:
        where.add("at >= ?", f.since)
    if f.until is not None:
        where.add("at < ?", f.until)
    rows = yield Query(
        f"SELECT {_AUDIT_COLS} FROM gateway_audit {where}ORDER BY at DESC, audit_id DESC LIMIT ?",
        [*where.params, limit],
    )
    return [_AUDIT_COLS.read(r) for r in rows]


def get_ticket(execution_id: str) -> Program[tuple[int, str] | None]:
    """The current attempt's ``(epoch, secret_hash)``."""
    rows = yield Query(
        "SELECT epoch, secret_hash FROM gateway_tickets WHERE execution_id = ?", (execution_id,)
    )
    return (rows[0][0], rows[0][1]) if rows else None


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayFacts:
    """What the gateway checks a call against, read in one go: the execution, its grant
    with the facts the grant is judged by (None: no grant), and the sealed secrets named
    (those that exist, in the grant's workspace)."""

    execution: Execution
    grant: facts.GrantFacts | None
    secrets: dict[str, SealedSecret]


def gateway_facts(execution_id: str, secret_names: Sequence[str]) -> Program[GatewayFacts]:
    # One statement (one round trip on PostgreSQL): a row per secret found, or one row.
    sql = facts.execution_facts_sql()
    if secret_names:
        marks = ",".join("?" * len(secret_names))
        sql = facts.execution_facts_sql(
            f", {_SECRET_COLS.of('s')}",
            f"LEFT JOIN secrets s ON s.workspace_id = g.workspace_id AND s.name IN ({marks}) ",
        )
    rows = yield Query(sql, [*secret_names, execution_id])
    if not rows:
        raise NotFound("execution", execution_id)
    execution, grant = facts.execution_facts_from_row(rows[0])
    n = facts.EXECUTION_FACTS_N
    found = {r[n + 1]: _SECRET_COLS.read(r[n:]) for r in rows if secret_names and r[n] is not None}
    return GatewayFacts(execution=execution, grant=grant, secrets=found)


def secret_names(workspace_id: str, names: Sequence[str]) -> Program[set[str]]:
    """Which of ``names`` exist in the workspace."""
    if not names:
        return set()
    marks = ",".join("?" * len(names))
    rows = yield Query(
        f"SELECT name FROM secrets WHERE workspace_id = ? AND name IN ({marks})",
        [workspace_id, *names],
    )
    return {r[0] for r in rows}
