"""Write programs for client-visible facts: sessions, the action log, snapshots,
idempotency records and artifact metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._actions import EncodedAction, check_session
from ._errors import NotFound, StoreError, WriteConflict
from ._json import dumps, loads
from ._records import ArtifactRecord, InFlight, Mismatch, New, Replay, SessionRecord
from ._sql import Dialect, Effects, Op, Program, Query

#: How long a completed key replays its response.
DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0
#: How long a claimed, not yet completed key is held: far longer than any accepting unit,
#: far shorter than the TTL (a Host that died holding it frees it then).
IN_FLIGHT_LEASE = 60.0


@dataclass(frozen=True, slots=True)
class Append(Op):
    """Append to a session: a journal op (``_exec_ops.JOURNAL_OPS``), which each backend
    defines once (``Dialect.append``/``Dialect.journal``)."""

    session_id: str
    actions: tuple[EncodedAction, ...]


def append_to_request_session(
    d: Dialect, session_id: str, actions: tuple[EncodedAction, ...], fx: Effects
) -> Program[None]:
    """Append actions encoded before their session was known (an input request's)."""
    if actions:
        check_session(session_id, actions)
        (result,) = yield from d.append([(session_id, actions)], fx)
        if isinstance(result, StoreError):
            raise result


@dataclass(frozen=True, slots=True)
class InsertSession(Op):
    session: SessionRecord

    def run(self, d: Dialect, fx: Effects) -> Program[SessionRecord]:
        s = self.session
        rows = yield Query(
            "INSERT INTO sessions (session_id, created_at, workspace_id, principal_id, title, "
            "plugin_digest, deployment_digest, metadata, last_seq, plugin, deployment, model, "
            "snapshot_digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING "
            "RETURNING session_id",
            (
                s.session_id,
                s.created_at,
                s.workspace_id,
                s.principal_id,
                s.title,
                s.plugin_digest,
                s.deployment_digest,
                None if s.metadata is None else dumps(s.metadata, "session metadata"),
                s.plugin,
                s.deployment,
                s.model,
                s.snapshot_digest,
            ),
        )
        if not rows:
            raise WriteConflict("session", s.session_id, "already exists")
        return s


@dataclass(frozen=True, slots=True)
class UpdateSessionTitle(Op):
    session_id: str
    title: str | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE sessions SET title = ? WHERE session_id = ? RETURNING session_id",
            (self.title, self.session_id),
        )
        if not rows:
            raise NotFound("session", self.session_id)


@dataclass(frozen=True, slots=True)
class PutSnapshot(Op):
    session_id: str
    seq: int
    state_json: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # Only the newest snapshot matters; an older one arriving late must not win.
        yield Query(
            "INSERT INTO snapshots (session_id, seq, state) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, state = excluded.state "
            "WHERE excluded.seq > snapshots.seq",
            (self.session_id, self.seq, self.state_json),
        )


@dataclass(frozen=True, slots=True)
class BeginIdempotency(Op):
    scope: str
    key: str
    request_hash: str
    now: float
    ttl: float

    def run(self, d: Dialect, fx: Effects) -> Program[New | InFlight | Replay | Mismatch]:
        # One statement claims the key when it is free or expired; on PostgreSQL a
        # concurrent claimer waits on the unique index and then sees it taken. A claim is
        # a lease (IN_FLIGHT_LEASE): a Host that dies between claiming and its accepting
        # unit does not keep the key from a retransmission for the whole TTL.
        lease = min(self.ttl, IN_FLIGHT_LEASE)
        rows = yield Query(
            "INSERT INTO idempotency (scope, idem_key, request_hash, status, response, created_at, "
            "expires_at) VALUES (?, ?, ?, 'in_flight', NULL, ?, ?) "
            "ON CONFLICT (scope, idem_key) DO UPDATE SET request_hash = excluded.request_hash, "
            "status = 'in_flight', response = NULL, created_at = excluded.created_at, "
            "expires_at = excluded.expires_at WHERE idempotency.expires_at <= ? "
            "RETURNING scope",
            (self.scope, self.key, self.request_hash, self.now, self.now + lease, self.now),
        )
        if rows:
            return New()
        rows = yield Query(
            "SELECT request_hash, status, response FROM idempotency "
            "WHERE scope = ? AND idem_key = ?",
            (self.scope, self.key),
        )
        request_hash, status, response = rows[0]
        if request_hash != self.request_hash:
            return Mismatch()
        if status == "completed":
            return Replay(loads(response))
        return InFlight()


@dataclass(frozen=True, slots=True)
class CompleteIdempotency(Op):
    """Complete a claimed key in the unit that does its work: only a claim still held
    completes, so when a stalled claimer's lease ran out and a retransmission took the key
    over, exactly one of the two units commits (the other raises and rolls back)."""

    scope: str
    key: str
    response: Any
    ttl: float = DEFAULT_IDEMPOTENCY_TTL

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE idempotency SET status = 'completed', response = ?, "
            "expires_at = created_at + ? "
            "WHERE scope = ? AND idem_key = ? AND status = 'in_flight' RETURNING scope",
            (dumps(self.response, "an idempotency response"), self.ttl, self.scope, self.key),
        )
        if not rows:
            held = yield Query(
                "SELECT status FROM idempotency WHERE scope = ? AND idem_key = ?",
                (self.scope, self.key),
            )
            if not held:
                raise NotFound("idempotency record", f"{self.scope}/{self.key}")
            raise WriteConflict(
                "idempotency record",
                f"{self.scope}/{self.key}",
                "was completed by another request after this one's claim ran out",
            )


@dataclass(frozen=True, slots=True)
class AbandonIdempotency(Op):
    scope: str
    key: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "DELETE FROM idempotency WHERE scope = ? AND idem_key = ? AND status = 'in_flight'",
            (self.scope, self.key),
        )


@dataclass(frozen=True, slots=True)
class PutArtifact(Op):
    artifact: ArtifactRecord

    def run(self, d: Dialect, fx: Effects) -> Program[ArtifactRecord]:
        a = self.artifact
        rows = yield Query(
            "INSERT INTO artifacts (artifact_id, session_id, name, media_type, size, sha256, "
            "created_at, turn_id, tool_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (artifact_id) DO NOTHING RETURNING artifact_id",
            (
                a.artifact_id,
                a.session_id,
                a.name,
                a.media_type,
                a.size,
                a.sha256,
                a.created_at,
                a.turn_id,
                a.tool_call_id,
            ),
        )
        if not rows:
            raise WriteConflict("artifact", a.artifact_id, "already exists")
        return a
