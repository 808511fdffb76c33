"""Read programs. They run on reader connections and never block the writer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._actions import action_from_row
from ._errors import InvalidInput, NotFound
from ._json import loads
from ._records import (
    ArtifactRecord,
    AttemptRecord,
    Checkpoint,
    CheckpointPart,
    Execution,
    InputRequestRecord,
    LedgerEntry,
    Page,
    SessionListStatus,
    SessionRecord,
    SessionSummary,
    Snapshot,
)
from ._sql import (
    ACTIVE_SQL,
    EXEC_COLS,
    INPUT_COLS,
    SESSION_COLS,
    Program,
    Query,
    execution_from_row,
    input_request_from_row,
    session_from_row,
)


def get_session(session_id: str) -> Program[SessionRecord]:
    rows = yield Query(f"SELECT {SESSION_COLS} FROM sessions WHERE session_id = ?", (session_id,))
    if not rows:
        raise NotFound("session", session_id)
    return session_from_row(rows[0])


#: What a list shows beside the session row, computed per row from indexed tables
#: (executions and input requests by session), never from the session's log or state.
_SUMMARY_COLS = (
    "(SELECT COUNT(*) FROM input_requests i WHERE i.session_id = s.session_id "
    "AND i.status = 'open'), "
    "(SELECT COUNT(*) FROM executions e WHERE e.session_id = s.session_id "
    "AND e.status IN ('queued', 'running', 'waiting_input')), "
    "(SELECT MAX(COALESCE(e.finished_at, e.created_at)) FROM executions e "
    "WHERE e.session_id = s.session_id)"
)
_STATUS_WHERE = {
    "requires_action": "EXISTS (SELECT 1 FROM input_requests i WHERE i.session_id = s.session_id "
    "AND i.status = 'open')",
    "running": "EXISTS (SELECT 1 FROM executions e WHERE e.session_id = s.session_id AND "
    "e.status IN ('queued', 'running', 'waiting_input')) AND NOT EXISTS (SELECT 1 FROM "
    "input_requests i WHERE i.session_id = s.session_id AND i.status = 'open')",
    "idle": "NOT EXISTS (SELECT 1 FROM executions e WHERE e.session_id = s.session_id AND "
    "e.status IN ('queued', 'running', 'waiting_input'))",
}


def list_session_summaries(
    limit: int,
    cursor: str | None,
    *,
    workspace_id: str | None = None,
    status: str | None = None,
    deployment: str | None = None,
) -> Program[Page[SessionSummary]]:
    where: list[str] = []
    params: list[Any] = []
    if workspace_id is not None:
        where.append("s.workspace_id = ?")
        params.append(workspace_id)
    if status is not None:
        if status not in _STATUS_WHERE:
            raise InvalidInput(f"status must be one of {', '.join(sorted(_STATUS_WHERE))}")
        where.append(_STATUS_WHERE[status])
    if deployment is not None:
        where.append("s.deployment = ?")
        params.append(deployment)
    if cursor is not None:
        # The cursor is the (created_at, session_id) of the last row served: a keyset,
        # so pages stay stable while new sessions are created.
        try:
            created, _, sid = cursor.partition("|")
            created_at = float(created)
        except ValueError as exc:
            raise InvalidInput(f"bad session cursor {cursor!r}") from exc
        where.append("(s.created_at < ? OR (s.created_at = ? AND s.session_id < ?))")
        params += [created_at, created_at, sid]
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    cols = ", ".join(f"s.{c.strip()}" for c in SESSION_COLS.split(","))
    rows = yield Query(
        f"SELECT {cols}, {_SUMMARY_COLS} FROM sessions s {clause}"
        "ORDER BY s.created_at DESC, s.session_id DESC LIMIT ?",
        [*params, limit + 1],
    )
    n = len(SESSION_COLS.split(","))
    items = []
    for r in rows[:limit]:
        session = session_from_row(r[:n])
        open_requests, active, last_turn = r[n], r[n + 1], r[n + 2]
        state: SessionListStatus = (
            "requires_action" if open_requests else "running" if active else "idle"
        )
        items.append(
            SessionSummary(
                session=session,
                status=state,
                open_input_requests=int(open_requests),
                last_activity_at=max(session.created_at, last_turn or 0.0),
            )
        )
    more = len(rows) > limit
    last = items[-1].session if items else None
    next_cursor = f"{last.created_at!r}|{last.session_id}" if more and last else None
    return Page(items, next_cursor)


def read_actions(session_id: str, after: int, limit: int) -> Program[list[dict[str, Any]]]:
    rows = yield Query(
        "SELECT action_id, type, body FROM actions WHERE session_id = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (session_id, after, limit),
    )
    return [action_from_row(session_id, r[0], r[1], r[2]) for r in rows]


def snapshots_due(session_ids: Sequence[str], every: int) -> Program[set[str]]:
    # Per session: the stored snapshot's seq, the log's end and whether a turn ended
    # since, in one read that decodes no body (the `type` column says it).
    marks = ",".join("?" * len(session_ids))
    rows = yield Query(
        "SELECT s.session_id, s.last_seq, COALESCE(n.seq, 0), EXISTS (SELECT 1 FROM "
        "actions a WHERE a.session_id = s.session_id AND a.seq > COALESCE(n.seq, 0) "
        "AND a.type = 'turn.ended') FROM sessions s "
        f"LEFT JOIN snapshots n ON n.session_id = s.session_id WHERE s.session_id IN ({marks})",
        tuple(session_ids),
    )
    return {
        session_id
        for session_id, last, stored, ended in rows
        if snapshot_due(last, stored, bool(ended), every)
    }


#: A new snapshot waits until the log since the stored one is at least 1/this of the log
#: before it.
SNAPSHOT_GROWTH = 20


def snapshot_due(last: int, stored: int, ended: bool, every: int) -> bool:
    """Whether a session whose log ends at seq `last` should replace its snapshot (stored
    at seq `stored`, 0 for none): a turn ended since, or `every` actions came, and the log
    grew by a `SNAPSHOT_GROWTH`th since the snapshot.

    Storing a snapshot costs the whole state, which grows with the log. At every turn end
    regardless, a long session paid its whole history again per turn (one session's steps/s
    halved within a minute of turns). With the growth bound, what a session's snapshots
    cost stays within a few per cent of its appends however long it gets, and a cold read
    replays at most a twentieth of the log after its snapshot (5,000 actions of a
    100,000-action session: `benchmarks/catchup.py`)."""
    grown = last - stored
    return grown > 0 and (ended or grown >= every) and grown * SNAPSHOT_GROWTH >= stored


_MANIFEST_PAGE = 20


def last_workspace_manifest(session_id: str) -> Program[str | None]:
    # Newest first: the newest turn or the one before normally has one, so the scan stops
    # within about a turn of the log's end, and decodes only the workspace actions' bodies.
    after = None
    while True:
        bound = "" if after is None else " AND seq < ?"
        rows = yield Query(
            "SELECT seq, action_id, type, body FROM actions WHERE session_id = ? AND type IN "
            f"('workspace.committed', 'workspace.restored'){bound} ORDER BY seq DESC LIMIT ?",
            (session_id, _MANIFEST_PAGE) if after is None else (session_id, after, _MANIFEST_PAGE),
        )
        for seq, action_id, action_type, body in rows:
            manifest = action_from_row(session_id, action_id, action_type, body)["data"].get(
                "manifest"
            )
            if manifest is not None:
                return str(manifest)
            after = seq
        if len(rows) < _MANIFEST_PAGE:
            return None


def get_snapshot(session_id: str) -> Program[Snapshot | None]:
    rows = yield Query("SELECT seq, state FROM snapshots WHERE session_id = ?", (session_id,))
    return Snapshot(rows[0][0], rows[0][1]) if rows else None


def get_execution(execution_id: str) -> Program[Execution]:
    rows = yield Query(
        f"SELECT {EXEC_COLS} FROM executions WHERE execution_id = ?", (execution_id,)
    )
    if not rows:
        raise NotFound("execution", execution_id)
    return execution_from_row(rows[0])


def list_executions(session_id: str, active: bool) -> Program[list[Execution]]:
    # The filter is SQL's: a session holds one execution per turn it ever ran, and decoding
    # them all to find the active one made each message cost the session's whole history.
    where = f" AND status IN {ACTIVE_SQL}" if active else ""
    rows = yield Query(
        f"SELECT {EXEC_COLS} FROM executions WHERE session_id = ?{where} ORDER BY pos",
        (session_id,),
    )
    return [execution_from_row(r) for r in rows]


def list_attempts(execution_id: str) -> Program[list[AttemptRecord]]:
    rows = yield Query(
        "SELECT attempt_id, execution_id, attempt, epoch, supervisor_id, claimed_at "
        "FROM attempts WHERE execution_id = ? ORDER BY attempt",
        (execution_id,),
    )
    return [
        AttemptRecord(
            attempt_id=r[0],
            execution_id=r[1],
            attempt=r[2],
            epoch=r[3],
            supervisor_id=r[4],
            claimed_at=r[5],
        )
        for r in rows
    ]


def load_checkpoint(execution_id: str) -> Program[Checkpoint]:
    rows = yield Query(
        "SELECT step_no, payload FROM checkpoints WHERE execution_id = ? "
        "ORDER BY step_no DESC LIMIT 1",
        (execution_id,),
    )
    full = CheckpointPart(rows[0][0], bytes(rows[0][1])) if rows else None
    rows = yield Query(
        "SELECT step_no, payload FROM checkpoint_steps WHERE execution_id = ? AND step_no > ? "
        "ORDER BY step_no",
        (execution_id, full.step_no if full else -1),
    )
    return Checkpoint(execution_id, full, [CheckpointPart(r[0], bytes(r[1])) for r in rows])


def get_ledger(execution_id: str) -> Program[list[LedgerEntry]]:
    rows = yield Query(
        "SELECT tool_call_id, status, idempotency_key, result, updated_at FROM tool_ledger "
        "WHERE execution_id = ? ORDER BY tool_call_id",
        (execution_id,),
    )
    return [
        LedgerEntry(
            execution_id=execution_id,
            tool_call_id=r[0],
            status=r[1],
            idempotency_key=r[2],
            result=loads(r[3]),
            updated_at=r[4],
        )
        for r in rows
    ]


def get_input_request(request_id: str) -> Program[InputRequestRecord]:
    rows = yield Query(
        f"SELECT {INPUT_COLS} FROM input_requests WHERE request_id = ?", (request_id,)
    )
    if not rows:
        raise NotFound("input request", request_id)
    return input_request_from_row(rows[0])


def list_input_requests(
    session_id: str | None, execution_id: str | None, status: str | None
) -> Program[list[InputRequestRecord]]:
    where, params = [], []
    for column, value in (
        ("session_id", session_id),
        ("execution_id", execution_id),
        ("status", status),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = yield Query(
        f"SELECT {INPUT_COLS} FROM input_requests {clause}ORDER BY created_at, request_id", params
    )
    return [input_request_from_row(r) for r in rows]


_ARTIFACT_COLS = (
    "artifact_id, session_id, name, media_type, size, sha256, created_at, turn_id, tool_call_id"
)


def _artifact(r: tuple[Any, ...]) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=r[0],
        session_id=r[1],
        name=r[2],
        media_type=r[3],
        size=r[4],
        sha256=r[5],
        created_at=r[6],
        turn_id=r[7],
        tool_call_id=r[8],
    )


def get_artifact(artifact_id: str) -> Program[ArtifactRecord]:
    rows = yield Query(
        f"SELECT {_ARTIFACT_COLS} FROM artifacts WHERE artifact_id = ?", (artifact_id,)
    )
    if not rows:
        raise NotFound("artifact", artifact_id)
    return _artifact(rows[0])


def list_artifacts(session_id: str) -> Program[list[ArtifactRecord]]:
    rows = yield Query(
        f"SELECT {_ARTIFACT_COLS} FROM artifacts WHERE session_id = ? "
        "ORDER BY created_at, artifact_id",
        (session_id,),
    )
    return [_artifact(r) for r in rows]
