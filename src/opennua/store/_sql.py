"""The sans-I/O core shared by both backends.

A store operation is a *program*: a generator that yields :class:`Query` objects and
receives each query's rows back, which the SQLite writer thread and the PostgreSQL
connection both drive. Most operations are one program for both backends, with a
:class:`Dialect` for the few spellings that differ. The ops an attempt journals at
every step (append, the fence, checkpoint records, the tool ledger) are defined once
*per backend* instead, behind the same dialect: as SQL programs on SQLite
(``_sqlite_ops``), as server-side functions on PostgreSQL (``sql/postgres_functions.sql``,
called by ``_pg_calls``), because one call per unit is what makes PostgreSQL fast and a
server-side function cannot drive a Python program (docs/store.md, "One definition").
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ulid import ULID

from ._json import check_text, loads
from ._records import (
    ACTIVE_STATUSES,
    ArtifactRecord,
    Execution,
    InputRequestRecord,
    SessionRecord,
)

if TYPE_CHECKING:
    from ._actions import EncodedAction
    from ._errors import StoreError
    from ._exec_ops import JournalOp

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement, written with ``?`` placeholders. ``many``: executemany, no rows."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False


Program = Generator[Query, list[Row], T]
AppendItems = Sequence[tuple[str, Sequence["EncodedAction"]]]
#: A fenced unit's ``(execution_id, epoch, owner)``.
Fence = tuple[str, int, str | None]


@dataclass
class Effects:
    """What a committed unit changed that the outside world must hear about."""

    #: session_id -> highest seq appended, for ``watch()`` wake-ups.
    wakeups: dict[str, int] = field(default_factory=dict)


class Dialect(abc.ABC):
    """One backend: how it spells the shared programs, and its own definition of the
    ops it writes its own way."""

    name: str
    #: ``FOR UPDATE SKIP LOCKED`` where rows can be locked; SQLite's single writer
    #: already serializes everything.
    skip_locked = ""
    #: ``FOR UPDATE``: lock the row read until the unit commits (a no-op on SQLite).
    lock_row = ""

    def sql(self, text: str) -> str:
        return text

    def in_(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    @abc.abstractmethod
    def append(self, items: AppendItems, fx: Effects) -> Program[list[list[int] | StoreError]]:
        """Append each item's actions to its session; per item, its seqs or the error it
        alone fails with (an unknown session). Re-appended ids (also repeats inside the
        call) keep their seq and write nothing; seqs are gapless; append order is commit
        order. A failing item writes nothing, whatever the others do."""

    @abc.abstractmethod
    def journal(
        self, fence: Fence | None, ops: Sequence[JournalOp], fx: Effects
    ) -> Program[list[Any]]:
        """All or nothing: the fence check, then journal ops in order (appends,
        checkpoint records, ledger moves: see ``_exec_ops``); each op's result.

        The fence checks (and where rows lock, locks) the execution row before the unit
        writes: ``NotFound``, or ``Fenced`` unless it is ``running`` at the fence's epoch
        (and owned by its owner, if given).
        """


def new_id(prefix: str, now: float) -> str:
    """A type-prefixed ULID whose time part comes from the injected clock."""
    return f"{prefix}_{ULID.from_timestamp(now)}"


# -- row mapping -------------------------------------------------------------------------

SESSION_COLS = (
    "session_id, created_at, workspace_id, principal_id, title, plugin_digest, "
    "deployment_digest, metadata, last_seq, plugin, deployment, model, snapshot_digest"
)


def session_from_row(r: Row) -> SessionRecord:
    return SessionRecord(
        session_id=r[0],
        created_at=r[1],
        workspace_id=r[2],
        principal_id=r[3],
        title=r[4],
        plugin_digest=r[5],
        deployment_digest=r[6],
        metadata=loads(r[7]),
        last_seq=r[8],
        plugin=r[9],
        deployment=r[10],
        model=r[11],
        snapshot_digest=r[12],
    )


#: `status IN ACTIVE_SQL`: an execution that still has a turn to finish.
ACTIVE_SQL = "(" + ", ".join(f"'{status}'" for status in ACTIVE_STATUSES) + ")"
EXEC_COLS = (
    "execution_id, session_id, turn_id, status, created_at, principal_id, trigger, input, "
    "retry_of, snapshot_digest, deadline_at, owner, epoch, attempt, lease_expires_at, "
    "cancel_requested, result, error, finished_at, trace_context"
)


def execution_from_row(r: Row) -> Execution:
    return Execution(
        execution_id=r[0],
        session_id=r[1],
        turn_id=r[2],
        status=r[3],
        created_at=r[4],
        principal_id=r[5],
        trigger=loads(r[6]),
        input=loads(r[7]),
        retry_of=r[8],
        snapshot_digest=r[9],
        deadline_at=r[10],
        owner=r[11],
        epoch=r[12],
        attempt=r[13],
        lease_expires_at=r[14],
        cancel_requested=bool(r[15]),
        result=loads(r[16]),
        error=loads(r[17]),
        finished_at=r[18],
        trace_context=loads(r[19]),
    )


INPUT_COLS = (
    "request_id, session_id, execution_id, turn_id, status, payload, created_at, "
    "tool_call_id, resolution, answered_by_principal, answered_by_client, expires_at, "
    "resolved_at"
)


def input_request_from_row(r: Row) -> InputRequestRecord:
    return InputRequestRecord(
        request_id=r[0],
        session_id=r[1],
        execution_id=r[2],
        turn_id=r[3],
        status=r[4],
        payload=loads(r[5]),
        created_at=r[6],
        tool_call_id=r[7],
        resolution=loads(r[8]),
        answered_by_principal=r[9],
        answered_by_client=r[10],
        expires_at=r[11],
        resolved_at=r[12],
    )


class Op:
    """One buffered write. Subclasses are frozen dataclasses; ``run`` is their program.

    Every text field (also of a record it carries) is checked when the op is built, in
    the caller's task: a string UTF-8 cannot hold fails that caller with
    :class:`InvalidInput` naming the field, before anything is queued. (JSON fields are
    checked by ``_json.dumps``, where they are encoded.)
    """

    __slots__ = ()

    def __post_init__(self) -> None:
        _check_fields(self)

    def run(self, d: Dialect, fx: Effects) -> Program[Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def _check_fields(obj: object) -> None:
    for name in _field_names(type(obj)):
        value = getattr(obj, name)
        kind = type(value)
        if kind is str:
            if not value.isascii():  # O(1); ASCII is always valid UTF-8
                check_text(value, name)
        elif kind in _RECORDS:
            _check_fields(value)


#: The records an op may carry, whose text fields are checked as the op's own.
_RECORDS = frozenset({SessionRecord, Execution, InputRequestRecord, ArtifactRecord})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names
