"""Write programs for client-visible facts: sessions, the action log, snapshots,
idempotency records and artifact metadata."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import Conflict, InvalidInput, NotFound, StoreError
from ._records import Artifact, InFlight, Mismatch, New, Replay, Session
from ._sql import Dialect, Effects, Op, Program, Query, chunks, dumps, load_body, loads

Action = dict[str, Any]


def stored_body(action: Action, seq: int | None) -> dict[str, Any]:
    """What the body column holds: the envelope with its seq, and 0 in place of the
    fields the row holds in columns (session, id, type: ~100 bytes of every action). The
    placeholders keep the envelope's key order for `action_from_row`."""
    body = dict(action)
    body["session_id"] = body["id"] = body["type"] = 0
    if seq is not None:
        body["seq"] = seq
    return body


def action_from_row(session_id: str, action_id: str, action_type: str, body: str | bytes) -> Action:
    """The envelope a row stores, whole again."""
    action: Action = load_body(body)
    if action.get("id") == 0:  # else written whole, before bodies left the columns out
        action["session_id"], action["id"], action["type"] = session_id, action_id, action_type
    return action


def normalize_actions(
    session_id: str | None, actions: Sequence[Mapping[str, Any]]
) -> tuple[Action, ...]:
    """Check the envelope fields the store relies on, before anything is queued.

    ``session_id`` None means "not known yet" (an input request's session is read at
    commit time); the program checks it then.
    """
    out = []
    for a in actions:
        if not isinstance(a, Mapping):
            raise InvalidInput(f"an action must be a mapping, got {type(a).__name__}")
        action_id, action_type = a.get("id"), a.get("type")
        if not isinstance(action_id, str) or not action_id:
            raise InvalidInput("an action needs a non-empty string 'id'")
        if not isinstance(action_type, str) or not action_type:
            raise InvalidInput(f"action {action_id!r} needs a non-empty string 'type'")
        owner = a.get("session_id")
        if session_id is not None and owner is not None and owner != session_id:
            raise InvalidInput(f"action {action_id!r} belongs to {owner!r}, not {session_id!r}")
        out.append(dict(a))
    return tuple(out)


def append_program(
    d: Dialect, items: Sequence[tuple[str, Sequence[Action]]], fx: Effects
) -> Program[list[list[int] | StoreError]]:
    """Append several batches (possibly to many sessions) with a handful of statements.

    Returns, per item, its seqs or the error that item alone fails with. Every check
    happens before the first write, so a failing item never leaves rows behind and the
    SQLite writer can run many callers' appends as one group without savepoints.

    On PostgreSQL the session rows are locked (in a fixed order, so two batches cannot
    deadlock) before seqs are read: append order equals commit order, and the dedupe
    lookup below runs after the lock, so it sees any concurrent append of the same id.
    """
    sids = sorted({sid for sid, _ in items})
    last: dict[str, int] = {}
    for part in chunks(sids, 500):
        where, params = d.in_("session_id", part)
        rows = yield Query(
            f"SELECT session_id, last_seq FROM sessions WHERE {where} "
            f"ORDER BY session_id{d.for_update}",
            params,
        )
        last.update((r[0], r[1]) for r in rows)
    pairs = sorted({(sid, a["id"]) for sid, acts in items if sid in last for a in acts})
    known: dict[tuple[str, str], int] = {}
    for pair_part in chunks(pairs, 400):
        table, params = d.pairs(pair_part)
        rows = yield Query(
            f"SELECT a.session_id, a.action_id, a.seq FROM {table} JOIN actions a "
            "ON a.session_id = v.column1 AND a.action_id = v.column2",
            params,
        )
        known.update(((r[0], r[1]), r[2]) for r in rows)
    first = dict(last)
    out, new_rows = assign_seqs(items, last, known, d.encode_body)
    if new_rows:
        yield d.insert_actions(new_rows)
        moved = [(seq, sid) for sid, seq in last.items() if seq != first[sid]]
        yield d.move_last_seqs(moved)
        for seq, sid in moved:
            fx.wakeups[sid] = seq
    return out


Row = tuple[str, int, str, str, str | bytes]


def assign_seqs(
    items: Sequence[tuple[str, Sequence[Action]]],
    last: dict[str, int],
    known: dict[tuple[str, str], int],
    encode: Callable[[Any], str | bytes],
) -> tuple[list[list[int] | StoreError], list[Row]]:
    """Per item, its seqs or the error it alone fails with; and the rows to insert.

    New ids are numbered after their session's `last` seq (advanced in place); ids in
    `known` keep their seq and write nothing. Both append paths (the shared program and
    SQLite's fast path) number actions here, so they cannot disagree.
    """
    out: list[list[int] | StoreError] = []
    new_rows: list[Row] = []
    for sid, acts in items:
        if sid not in last:
            out.append(NotFound("session", sid))
            continue
        bad = next((a for a in acts if a.get("session_id") not in (None, sid)), None)
        if bad is not None:
            out.append(InvalidInput(f"action {bad['id']!r} does not belong to {sid!r}"))
            continue
        seqs = []
        for a in acts:
            key = (sid, a["id"])
            seq = known.get(key)
            if seq is None:
                seq = last[sid] + 1
                last[sid] = known[key] = seq
                body = stored_body(a, seq)
                new_rows.append((sid, seq, a["id"], a["type"], encode(body)))
            seqs.append(seq)
        out.append(seqs)
    return out, new_rows


@dataclass(frozen=True, slots=True)
class Append(Op):
    session_id: str
    actions: tuple[Action, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[list[int]]:
        (result,) = yield from append_program(d, [(self.session_id, self.actions)], fx)
        if isinstance(result, StoreError):
            raise result
        return result


def append_to_request_session(
    d: Dialect, session_id: str, actions: tuple[Action, ...], fx: Effects
) -> Program[None]:
    if actions:
        (result,) = yield from append_program(d, [(session_id, actions)], fx)
        if isinstance(result, StoreError):
            raise result


@dataclass(frozen=True, slots=True)
class CreateSession(Op):
    session: Session

    def run(self, d: Dialect, fx: Effects) -> Program[Session]:
        s = self.session
        rows = yield Query(
            "INSERT INTO sessions (session_id, created_at, workspace_id, principal_id, title, "
            "plugin_digest, deployment_digest, metadata, last_seq) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT (session_id) DO NOTHING "
            "RETURNING session_id",
            (
                s.session_id,
                s.created_at,
                s.workspace_id,
                s.principal_id,
                s.title,
                s.plugin_digest,
                s.deployment_digest,
                None if s.metadata is None else dumps(s.metadata),
            ),
        )
        if not rows:
            raise Conflict("session", s.session_id, "already exists")
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
        # concurrent claimer waits on the unique index and then sees it taken.
        rows = yield Query(
            "INSERT INTO idempotency (scope, idem_key, request_hash, status, response, created_at, "
            "expires_at) VALUES (?, ?, ?, 'in_flight', NULL, ?, ?) "
            "ON CONFLICT (scope, idem_key) DO UPDATE SET request_hash = excluded.request_hash, "
            "status = 'in_flight', response = NULL, created_at = excluded.created_at, "
            "expires_at = excluded.expires_at WHERE idempotency.expires_at <= ? "
            "RETURNING scope",
            (self.scope, self.key, self.request_hash, self.now, self.now + self.ttl, self.now),
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
    scope: str
    key: str
    response: Any

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE idempotency SET status = 'completed', response = ? "
            "WHERE scope = ? AND idem_key = ? RETURNING scope",
            (dumps(self.response), self.scope, self.key),
        )
        if not rows:
            raise NotFound("idempotency record", f"{self.scope}/{self.key}")


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
    artifact: Artifact

    def run(self, d: Dialect, fx: Effects) -> Program[Artifact]:
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
            raise Conflict("artifact", a.artifact_id, "already exists")
        return a
