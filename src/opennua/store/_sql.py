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
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ulid import ULID

from ._actions import EncodedAction
from ._errors import NotFound, StoreError, WriteConflict
from ._json import check_text

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement, written with ``?`` placeholders. ``many``: executemany, no rows."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False


Program = Generator[Query, list[Row], T]
AppendItems = Sequence[tuple[str, Sequence[EncodedAction]]]
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

    def rights_changed(self, principal_id: str) -> Program[None]:
        """Tell every process, once this unit commits, that `principal_id` may have lost
        rights (``Store.watch_rights``). SQLite's store tells its one process after the
        commit itself; PostgreSQL's NOTIFY rides in the transaction."""
        yield from ()

    @abc.abstractmethod
    def append(self, items: AppendItems, fx: Effects) -> Program[list[list[int] | StoreError]]:
        """Append each item's actions to its session; per item, its seqs or the error it
        alone fails with (an unknown session). Re-appended ids (also repeats inside the
        call) keep their seq and write nothing; seqs are gapless; append order is commit
        order. A failing item writes nothing, whatever the others do."""


class Where:
    """A listing's WHERE clause: the conditions its filter gives, and their parameters
    in order. ``str()`` is ``WHERE a AND b `` (trailing space), or nothing."""

    def __init__(self) -> None:
        self.conditions: list[str] = []
        self.params: list[Any] = []

    def add(self, condition: str, *params: Any) -> None:
        self.conditions.append(condition)
        self.params.extend(params)

    def equal(self, column: str, value: Any) -> None:
        """``column = value``, when ``value`` is given (not None)."""
        if value is not None:
            self.add(f"{column} = ?", value)

    def __str__(self) -> str:
        return f"WHERE {' AND '.join(self.conditions)} " if self.conditions else ""


def new_id(prefix: str, now: float) -> str:
    """A type-prefixed ULID whose time part comes from the injected clock."""
    return f"{prefix}_{ULID.from_timestamp(now)}"


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
        elif kind in CHECKED_RECORDS:
            _check_fields(value)


#: The records an op may carry, whose text fields are checked as the op's own. Each
#: domain module adds its own (this core imports none of them).
CHECKED_RECORDS: set[type] = set()
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


R = TypeVar("R", bound="DataclassInstance")


class Columns(Generic[R]):
    """The columns a record is stored in: its dataclass fields, in order, named as in
    its table, so a record's column list is written once (its dataclass). ``decode``
    converts the few columns that are not the field's value as it is (JSON text, a
    0/1 flag); a write passes those as keywords to :meth:`values`."""

    __slots__ = ("_decode", "names", "record")

    def __init__(
        self, record: type[R], *, decode: Mapping[str, Callable[[Any], Any]] | None = None
    ) -> None:
        self.record = record
        self.names = _field_names(record)
        self._decode = dict(decode or {})

    def __len__(self) -> int:
        return len(self.names)

    def __str__(self) -> str:
        return ", ".join(self.names)

    def of(self, alias: str) -> str:
        """The columns of table ``alias`` in a join: ``a.x, a.y``."""
        return ", ".join(f"{alias}.{name}" for name in self.names)

    @property
    def marks(self) -> str:
        """One ``?`` per column, for ``VALUES (...)``."""
        return ", ".join("?" * len(self.names))

    def values(self, record: R, **encoded: Any) -> tuple[Any, ...]:
        """The record's fields in column order; ``encoded`` gives a column's value where
        it is not the field's own (JSON text, a 0/1 flag)."""
        return tuple(
            encoded[name] if name in encoded else getattr(record, name) for name in self.names
        )

    def insert_new(
        self, table: str, record: R, exists: WriteConflict, **encoded: Any
    ) -> Program[R]:
        """Insert ``record`` as a new row of ``table`` (``encoded`` as for :meth:`values`);
        a row already holding one of its unique keys writes nothing and raises ``exists``."""
        rows = yield Query(
            f"INSERT INTO {table} ({self}) VALUES ({self.marks}) "
            f"ON CONFLICT DO NOTHING RETURNING {self.names[0]}",
            self.values(record, **encoded),
        )
        if not rows:
            raise exists
        return record

    def one(self, rows: Sequence[Row], kind: str, key: str) -> R:
        """The record in the first of ``rows``; none is :class:`NotFound` ``(kind, key)``."""
        if not rows:
            raise NotFound(kind, key)
        return self.read(rows[0])

    def read(self, row: Row) -> R:
        """The record in ``row``'s first ``len(self)`` values."""
        fields = dict(zip(self.names, row[: len(self.names)], strict=True))
        for name, decode in self._decode.items():
            fields[name] = decode(fields[name])
        return self.record(**fields)
