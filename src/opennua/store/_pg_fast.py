"""The PostgreSQL fast path: a unit as one call of a server-side function.

The shared op programs (``_log_ops``, ``_exec_ops``) cost a round trip per read they
need plus BEGIN/COMMIT. The hot units — runs of plain appends, and a fenced step
(fence check + appends + checkpoint + ledger ops) — are instead sent as one
``SELECT nua_append_rows(...)`` / ``SELECT nua_unit(...)`` on an autocommit connection,
so the call *is* the transaction (migration 0003 defines both). Any unit with an op
the functions do not know takes the program path. docs/store.md explains the split.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg_errors

from ._errors import Conflict, Fenced, NotFound, StoreError
from ._exec_ops import LedgerSet, LedgerStart, PutCheckpoint
from ._log_ops import Action, Append, stored_body
from ._sql import dumps
from ._unit import Unit

#: Stands for the seq while a body whose seq key is not last is encoded, then split at it.
_SEQ_MARK = 7_654_321_098_765_432_109

APPEND_SQL = (
    "SELECT nua_append_rows(%s::text[], %s::int[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::text[])"
)
UNIT_SQL = (
    "SELECT nua_unit(%s, %s, %s, %s, %s::text[], %s::text[], %s::text[], %s::float8[], "
    "%s::bigint[], %s::bytea[], %s::int[], %s::text[], %s::text[], %s::text[], %s::text[])"
)


class ActionRows:
    """Column arrays of actions to append; each body split around its ``seq`` value."""

    __slots__ = ("aid", "head", "tail", "typ")

    def __init__(self) -> None:
        self.aid: list[str] = []
        self.typ: list[str] = []
        self.head: list[str] = []
        self.tail: list[str] = []

    def add(self, actions: Sequence[Action]) -> None:
        for a in actions:
            head, tail = split_body(a)
            self.aid.append(a["id"])
            self.typ.append(a["type"])
            self.head.append(head)
            self.tail.append(tail)

    def params(self) -> list[str]:
        return [text_array(c) for c in (self.aid, self.typ, self.head, self.tail)]


def plain_array(values: Sequence[float | int | None]) -> str:
    """A numeric array literal (``repr`` of a float is valid float8 input, inf and nan too)."""
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"


def _plain(value: object) -> bool:
    return value is None or type(value) in (int, float)


def bytea_array(values: Sequence[bytes | None]) -> str:
    return "{" + ",".join("NULL" if v is None else '"\\\\x' + v.hex() + '"' for v in values) + "}"


def text_array(values: Sequence[str | None]) -> str:
    """A ``text[]`` literal. Much cheaper than psycopg's pure-Python array dumper, which
    escapes element by element with a regex (half the client CPU of a batch append)."""
    return (
        "{"
        + ",".join(
            "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in values
        )
        + "}"
    )


def split_body(action: Action) -> tuple[str, str]:
    """The stored body (``stored_body``) without its seq value: ``head + str(seq) + tail``
    is byte-identical to what the shared append program stores."""
    body = stored_body(action, None)
    if "seq" not in body:  # the common case: seq goes last
        return dumps(body)[:-1] + ',"seq":', "}"
    body["seq"] = _SEQ_MARK
    text = dumps(body)
    mark = f'"seq":{_SEQ_MARK}'
    if text.count(mark) != 1:
        raise _Unsupported
    head, tail = text.split(mark)
    return head + '"seq":', tail


class _Unsupported(Exception):
    """This unit needs the program path."""


def appendable(actions: Sequence[Action], session_id: str) -> bool:
    return all(
        a.get("session_id") in (None, session_id) and all(isinstance(k, str) for k in a)
        for a in actions
    )


def append_params(
    items: Sequence[tuple[str, Sequence[Action]]],
) -> tuple[list[str], list[tuple[str, list[int]]]] | None:
    """Arguments of ``nua_append_rows``: the rows grouped by session in session_id order
    (the lock order), each session's items in arrival order (their seq order)."""
    groups: dict[str, list[int]] = {}
    for index, (sid, acts) in enumerate(items):
        if not acts or not appendable(acts, sid):
            return None
        groups.setdefault(sid, []).append(index)
    order = sorted(groups.items())
    rows = ActionRows()
    counts = []
    row_sids: list[str] = []
    try:
        for sid, indexes in order:
            n = 0
            for index in indexes:
                acts = items[index][1]
                rows.add(acts)
                n += len(acts)
            counts.append(n)
            row_sids.extend([sid] * n)
    except _Unsupported:
        return None
    sessions = text_array([sid for sid, _ in order])
    counts_array = "{" + ",".join(map(str, counts)) + "}"
    return [sessions, counts_array, text_array(row_sids), *rows.params()], order


def append_outcomes(
    items: Sequence[tuple[str, Sequence[Action]]],
    order: list[tuple[str, list[int]]],
    seqs: Sequence[int | None],
) -> list[list[int] | StoreError]:
    out: list[list[int] | StoreError] = [[] for _ in items]
    at = 0
    for sid, indexes in order:
        for index in indexes:
            n = len(items[index][1])
            mine = seqs[at : at + n]
            at += n
            if mine[0] is None:
                out[index] = NotFound("session", sid)
            else:
                out[index] = [int(s) for s in mine if s is not None]
    return out


def unit_params(unit: Unit) -> list[Any] | None:
    """The arguments of ``nua_unit`` for this unit, or None when it needs the program path."""
    fence = unit.fence
    execution_id = fence[0] if fence else None
    kinds: list[str] = []
    keys: list[str | None] = []
    texts: list[str | None] = []
    nums: list[float | None] = []
    ints: list[int | None] = []
    bins: list[bytes | None] = []
    counts: list[int] = []
    rows = ActionRows()
    try:
        for op in unit.ops:
            kind: str
            key: str | None = None
            text: str | None = None
            num: float | None = None
            integer: int | None = None
            blob: bytes | None = None
            count = 0
            if type(op) is Append:
                if not appendable(op.actions, op.session_id):
                    return None
                kind, key, count = "append", op.session_id, len(op.actions)
                rows.add(op.actions)
            elif type(op) is PutCheckpoint:
                if op.execution_id != execution_id:
                    return None
                kind = "full" if op.full else "step"
                integer, blob = op.step_no, op.payload
            elif type(op) is LedgerStart:
                if op.execution_id != execution_id:
                    return None
                kind, key, text, num = "start", op.tool_call_id, op.idempotency_key, op.now
            elif type(op) is LedgerSet:
                if op.execution_id != execution_id:
                    return None
                kind, key, num = op.status, op.tool_call_id, op.now
                if op.status == "completed":
                    kind = "complete"
                    text = None if op.result is None else dumps(op.result)
                elif op.status != "unknown" or op.result is not None:
                    return None
            else:
                return None
            if not (_plain(num) and _plain(integer)):
                return None
            kinds.append(kind)
            keys.append(key)
            texts.append(text)
            nums.append(num)
            ints.append(integer)
            bins.append(blob)
            counts.append(count)
    except _Unsupported:
        return None
    if fence is None and any(k != "append" for k in kinds):
        return None
    epoch, owner = (fence[1], fence[2]) if fence else (0, None)
    return [
        execution_id,
        fence is not None,
        epoch,
        owner,
        text_array(kinds),
        text_array(keys),
        text_array(texts),
        plain_array(nums),
        plain_array(ints),
        bytea_array(bins),
        plain_array(counts),
        *rows.params(),
    ]


def unit_results(unit: Unit, seqs: Sequence[int]) -> list[Any]:
    results: list[Any] = []
    at = 0
    for op in unit.ops:
        if type(op) is Append:
            n = len(op.actions)
            results.append([int(s) for s in seqs[at : at + n]])
            at += n
        else:
            results.append(None)
    return results


def raised(exc: pg_errors.Error, unit: Unit | None) -> StoreError | None:
    """The store error a function raised on purpose (our SQLSTATEs), else None."""
    state = exc.sqlstate
    if state not in ("NUA01", "NUA02", "NUA03"):
        return None
    diag = exc.diag
    kind, key, hint = diag.message_primary or "", diag.message_detail or "", diag.message_hint
    if state == "NUA01":
        assert unit is not None and unit.fence is not None
        return Fenced(unit.fence[0], unit.fence[1], int(key), hint or "")
    if state == "NUA02":
        return NotFound(kind, key)
    return Conflict(kind, key, hint or "")
