"""SQLite's own definition of the journal ops: append, the fence, checkpoint records and
the tool ledger (the ops PostgreSQL defines as server-side functions; see ``_sql``).

Each is the only definition of its op on SQLite: the writer runs a run of many callers'
appends, a fenced step and an input request's appends through these same programs.

Append is the hot path of group commit, and with a hundred callers per COMMIT the writer
thread's Python was a third of the batch time, so it is written for it:

- set-valued parameters travel as ONE JSON text read with ``json_each``, so each
  statement's SQL is constant and stays in sqlite3's prepared-statement cache (an
  ``IN (?,?,...)`` list is new SQL for every batch size, re-parsed and re-planned);
- bodies arrive encoded (``_actions``): the writer only puts each seq in place and
  deflates the text (``_bodies``), every check happens before the first write;
- rows go straight to ``action_log`` keyed by the session's integer ``sk`` (migration 4),
  not through the ``actions`` view the reads see.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._bodies import pack
from ._errors import Fenced, NotFound, StoreError, WriteConflict
from ._executions import JournalOp, LedgerSet, LedgerStart, PutCheckpoint
from ._json import dumps
from ._log import Append
from ._sql import AppendItems, Effects, Fence, Program, Query
from ._unit import JournalDialect

# Parameters only: ASCII escapes keep any string exact through SQLite's JSON parser.
_param = json.JSONEncoder(separators=(",", ":")).encode

_LAST_SEQS = (
    "SELECT session_id, sk, last_seq FROM sessions "
    "WHERE session_id IN (SELECT value FROM json_each(?))"
)
_KNOWN = (
    "SELECT a.sk, a.action_id, a.seq FROM json_each(?) AS v JOIN action_log a "
    "ON a.action_id = v.value ->> 1 AND a.sk = v.value ->> 0"
)
_INSERT = "INSERT INTO action_log (sk, seq, action_id, type, body) VALUES (?, ?, ?, ?, ?)"
# executemany, not UPDATE ... FROM json_each: measured ~10% cheaper for 100 sessions.
_MOVE = "UPDATE sessions SET last_seq = ? WHERE sk = ?"


class SQLiteDialect(JournalDialect):
    name = "sqlite"

    def append(self, items: AppendItems, fx: Effects) -> Program[list[list[int] | StoreError]]:
        last: dict[str, int] = {}
        sk: dict[str, int] = {}
        sids = list({sid for sid, _ in items})
        for sid, key, seq in (yield Query(_LAST_SEQS, (_param(sids),))):
            last[sid] = seq
            sk[sid] = key
        # Only a session that has actions can have one of these already (a resumed
        # attempt's re-emitted facts): a new one's (a webhook's, created in this very
        # unit) has none, and the read would find nothing.
        pairs = [[sk[sid], a.action_id] for sid, acts in items if last.get(sid) for a in acts]
        known: dict[tuple[str, str], int] = {}
        if pairs:
            sid_of = {key: sid for sid, key in sk.items()}
            for r in (yield Query(_KNOWN, (_param(pairs),))):
                known[(sid_of[r[0]], r[1])] = r[2]
        first = dict(last)
        out: list[list[int] | StoreError] = []
        new_rows = []
        for sid, acts in items:
            if sid not in last:
                out.append(NotFound("session", sid))
                continue
            seqs = []
            for a in acts:
                seq = known.get((sid, a.action_id))
                if seq is None:  # new: numbered after the session's last seq
                    seq = last[sid] = known[(sid, a.action_id)] = last[sid] + 1
                    new_rows.append((sk[sid], seq, a.action_id, a.type, pack(a.body(seq))))
                seqs.append(seq)
            out.append(seqs)
        if new_rows:
            yield Query(_INSERT, new_rows, many=True)
            moved = [(seq, sid) for sid, seq in last.items() if seq != first[sid]]
            yield Query(_MOVE, [(seq, sk[sid]) for seq, sid in moved], many=True)
            for seq, sid in moved:
                if seq > fx.wakeups.get(sid, 0):
                    fx.wakeups[sid] = seq
        return out

    def journal(
        self, fence: Fence | None, ops: Sequence[JournalOp], fx: Effects
    ) -> Program[list[Any]]:
        if fence is not None:
            yield from _fence(*fence)
        results: list[Any] = []
        for op in ops:
            if isinstance(op, Append):
                (result,) = yield from self.append([(op.session_id, op.actions)], fx)
                if isinstance(result, StoreError):
                    raise result
                results.append(result)
            elif isinstance(op, PutCheckpoint):
                yield from _put_checkpoint(op)
                results.append(None)
            elif isinstance(op, LedgerStart):
                yield from _ledger_start(op)
                results.append(None)
            else:
                yield from _ledger_set(op)
                results.append(None)
        return results


def _fence(execution_id: str, epoch: int, owner: str | None) -> Program[None]:
    # No lock needed: this writer is the only one, so nothing moves the epoch between
    # this check and the unit's COMMIT.
    rows = yield Query(
        "SELECT epoch, status, owner FROM executions WHERE execution_id = ?", (execution_id,)
    )
    if not rows:
        raise NotFound("execution", execution_id)
    current, status, current_owner = rows[0]
    if current != epoch or status != "running" or owner not in (None, current_owner):
        raise Fenced(execution_id, epoch, current, status)


def _put_checkpoint(op: PutCheckpoint) -> Program[None]:
    table = "checkpoints" if op.full else "checkpoint_steps"
    rows = yield Query(
        f"INSERT INTO {table} (execution_id, step_no, payload) VALUES (?, ?, ?) "
        "ON CONFLICT (execution_id, step_no) DO NOTHING RETURNING step_no",
        (op.execution_id, op.step_no, op.payload),
    )
    if not rows:
        raise WriteConflict(table, f"{op.execution_id}/{op.step_no}", "already recorded")


def _ledger_start(op: LedgerStart) -> Program[None]:
    # Re-starting is allowed (an idempotent re-run after a resume), re-starting a
    # completed call is not: its effect already happened.
    rows = yield Query(
        "INSERT INTO tool_ledger (execution_id, tool_call_id, status, idempotency_key, "
        "result, updated_at) VALUES (?, ?, ?, ?, NULL, ?) "
        "ON CONFLICT (execution_id, tool_call_id) DO UPDATE SET status = excluded.status, "
        "idempotency_key = excluded.idempotency_key, updated_at = excluded.updated_at "
        "WHERE tool_ledger.status <> 'completed' RETURNING status",
        (
            op.execution_id,
            op.tool_call_id,
            "completed" if op.ran else "started",
            op.idempotency_key,
            op.now,
        ),
    )
    if not rows:
        raise WriteConflict("tool call", op.tool_call_id, "already completed")


def _ledger_set(op: LedgerSet) -> Program[None]:
    only_started = " AND status = 'started'" if op.status == "unknown" else ""
    rows = yield Query(
        "UPDATE tool_ledger SET status = ?, result = ?, updated_at = ? "
        f"WHERE execution_id = ? AND tool_call_id = ?{only_started} RETURNING status",
        (
            op.status,
            None if op.result is None else dumps(op.result, "a tool call's result"),
            op.now,
            op.execution_id,
            op.tool_call_id,
        ),
    )
    if rows:
        return
    rows = yield Query(
        "SELECT status FROM tool_ledger WHERE execution_id = ? AND tool_call_id = ?",
        (op.execution_id, op.tool_call_id),
    )
    if not rows:
        raise NotFound("tool call", op.tool_call_id)
    raise WriteConflict("tool call", op.tool_call_id, f"is {rows[0][0]}, not started")
