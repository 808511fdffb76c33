"""PostgreSQL's definition of the journal ops: calls of ``nua_unit``, the server-side
function in ``sql/postgres_functions.sql`` that is their only definition on PostgreSQL.

A unit made only of journal ops (appends, checkpoint records, ledger ops, under a fence
or not) and a run of many callers' appends are each sent as ONE call on an autocommit
connection: the call is the transaction and the unit costs one round trip
(``_postgres._run_call``). A unit with any other op runs its programs in a transaction,
and the dialect below calls the function there for its journal ops. This module only
says how a Python op is passed to the function, and maps the function's errors back.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from psycopg import errors as pg_errors

from ._actions import EncodedAction
from ._bodies import pack
from ._errors import Fenced, InvalidInput, NotFound, StoreError, WriteConflict
from ._executions import JOURNAL_OPS, JournalOp, LedgerSet, LedgerStart, PutCheckpoint
from ._json import dumps
from ._log import Append
from ._sql import AppendItems, Effects, Fence, Program, Query, Row
from ._unit import JournalDialect, Unit

#: Where a change that may take rights away is announced (`Dialect.rights_changed`).
RIGHTS_CHANNEL = "nua_rights"

UNIT_SQL = (
    "SELECT seqs, missing FROM nua_unit(?, ?, ?, ?, ?, ?::text[], ?::text[], ?::text[], "
    "?::text[], ?::bytea[], ?::text[], ?::text[], ?::text[], ?::float8[], "
    "?::bigint[], ?::bytea[])"
)


class PostgresDialect(JournalDialect):
    name = "postgres"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    lock_row = " FOR UPDATE"

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def in_(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def rights_changed(self, principal_id: str) -> Program[None]:
        # Delivered at COMMIT, to every listening process (this one too), or never.
        yield Query(f"SELECT pg_notify('{RIGHTS_CHANNEL}', ?)", (principal_id,))

    # The function NOTIFYs the sessions it moved (delivered only if the COMMIT lands), so
    # neither method reports wake-ups in ``fx``.

    def append(self, items: AppendItems, fx: Effects) -> Program[list[list[int] | StoreError]]:
        rows = yield Query(UNIT_SQL, call_args(None, None, False, items, ()))
        return append_outcomes(items, rows[0])

    def journal(
        self, fence: Fence | None, ops: Sequence[JournalOp], fx: Effects
    ) -> Program[list[Any]]:
        rows = yield Query(UNIT_SQL, journal_call(fence, ops))
        return journal_results(ops, rows[0])


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains a literal '?' or '%', so a plain replace is exact.
    assert "%" not in text, text
    return text.replace("?", "%s")


def journal_unit(unit: Unit) -> list[JournalOp] | None:
    """The unit's ops if they are all journal ops (one call can hold them), else None."""
    if all(type(op) in JOURNAL_OPS for op in unit.ops):
        return list(unit.ops)  # type: ignore[arg-type]
    return None


def journal_call(fence: Fence | None, ops: Sequence[JournalOp]) -> list[Any]:
    """The arguments of one all-or-nothing ``nua_unit`` call: the fence and the ops."""
    appends: list[tuple[str, Sequence[EncodedAction]]] = []
    others: list[PutCheckpoint | LedgerStart | LedgerSet] = []
    for op in ops:
        if isinstance(op, Append):
            appends.append((op.session_id, op.actions))
        else:
            others.append(op)
    if fence is not None:
        return call_args(fence[0], (fence[1], fence[2]), True, appends, others)
    # No fence to check: appends of an unfenced unit, or journal ops of a fenced unit whose
    # fence an earlier call in its transaction checked (checkpoint and ledger ops come
    # only in fenced units, all of one execution).
    return call_args(others[0].execution_id if others else None, None, True, appends, others)


def batch_call(units: Sequence[Unit]) -> tuple[AppendItems, list[Any]]:
    """A run of single-append units (many callers) as one call; each fails alone."""
    items = [(op.session_id, op.actions) for op in _single_appends(units)]
    return items, call_args(None, None, False, items, ())


def _single_appends(units: Sequence[Unit]) -> list[Append]:
    out = []
    for unit in units:
        (op,) = unit.ops
        assert isinstance(op, Append)
        out.append(op)
    return out


def call_args(
    execution_id: str | None,
    fence: tuple[int, str | None] | None,
    whole: bool,
    appends: AppendItems,
    ops: Sequence[PutCheckpoint | LedgerStart | LedgerSet],
) -> list[Any]:
    rowsid: list[str] = []
    aid: list[str] = []
    typ: list[str] = []
    bodies: list[bytes] = []
    for sid, acts in appends:
        for a in acts:
            rowsid.append(sid)
            aid.append(a.action_id)
            typ.append(a.type)
            # The seq is the server's to assign: the row's column holds it (0 in the body).
            bodies.append(pack(a.body(0)))
    kinds: list[str] = []
    keys: list[str | None] = []
    texts: list[str | None] = []
    nums: list[float | None] = []
    ints: list[int | None] = []
    bins: list[bytes | None] = []
    for op in ops:
        assert op.execution_id == execution_id, "one unit, one execution"
        key: str | None = None
        text: str | None = None
        num: float | None = None
        step: int | None = None
        blob: bytes | None = None
        if isinstance(op, PutCheckpoint):
            kind, step, blob = ("full" if op.full else "step"), _int(op.step_no), op.payload
        elif isinstance(op, LedgerStart):
            kind = "ran" if op.ran else "start"
            key, text, num = op.tool_call_id, op.idempotency_key, _num(op.now)
        elif op.status == "completed":
            kind, key, num = "complete", op.tool_call_id, _num(op.now)
            text = None if op.result is None else dumps(op.result, "a tool call's result")
        else:
            assert op.status == "unknown" and op.result is None, op
            kind, key, num = "unknown", op.tool_call_id, _num(op.now)
        kinds.append(kind)
        keys.append(key)
        texts.append(text)
        nums.append(num)
        ints.append(step)
        bins.append(blob)
    epoch, owner = fence if fence is not None else (0, None)
    return [
        execution_id,
        fence is not None,
        epoch,
        owner,
        whole,
        text_array(list(dict.fromkeys(sid for sid, _ in appends))),
        *(text_array(c) for c in (rowsid, aid, typ)),
        bytea_array(bodies),
        *(text_array(c) for c in (kinds, keys, texts)),
        plain_array(nums),
        plain_array(ints),
        bytea_array(bins),
    ]


def append_outcomes(items: AppendItems, row: Row) -> list[list[int] | StoreError]:
    """Per item, its seqs or NotFound, from one call's ``(seqs, missing)``."""
    seqs, missing = row
    gone = set(missing or ())
    out: list[list[int] | StoreError] = []
    at = 0
    for sid, acts in items:
        n = len(acts)
        out.append(NotFound("session", sid) if sid in gone else [int(s) for s in seqs[at : at + n]])
        at += n
    return out


def journal_results(ops: Sequence[JournalOp], row: Row) -> list[Any]:
    """Each op's result from one call: an append's seqs (in op order), else None."""
    seqs = row[0]
    results: list[Any] = []
    at = 0
    for op in ops:
        if isinstance(op, Append):
            n = len(op.actions)
            results.append([int(s) for s in seqs[at : at + n]])
            at += n
        else:
            results.append(None)
    return results


def raised(exc: pg_errors.Error) -> StoreError | None:
    """The store error the function raised on purpose (our SQLSTATEs), else None."""
    state = exc.sqlstate
    if state not in ("NUA01", "NUA02", "NUA03"):
        return None
    diag = exc.diag
    primary, detail, hint = diag.message_primary or "", diag.message_detail or "", diag.message_hint
    if state == "NUA01":
        epoch, current = detail.split(" ")
        return Fenced(primary, int(epoch), int(current), hint or "")
    if state == "NUA02":
        return NotFound(primary, detail)
    return WriteConflict(primary, detail, hint or "")


# -- array literals. Much cheaper than psycopg's pure-Python array dumper, which escapes
# element by element with a regex (half the client CPU of a batch append).


def text_array(values: Sequence[str | None]) -> str:
    """A ``text[]`` literal."""
    return (
        "{"
        + ",".join(
            "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in values
        )
        + "}"
    )


def plain_array(values: Sequence[float | int | None]) -> str:
    """A numeric array literal (``repr`` of a float is valid float8 input, inf and nan too)."""
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"


def bytea_array(values: Sequence[bytes | None]) -> str:
    return "{" + ",".join("NULL" if v is None else '"\\\\x' + v.hex() + '"' for v in values) + "}"


def _num(value: float | None) -> float | None:
    if value is None or type(value) is float:
        return value
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a time must be a number, got {value!r}") from exc


def _int(value: int) -> int:
    if type(value) is int:
        return value
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a step number must be an integer, got {value!r}") from exc
