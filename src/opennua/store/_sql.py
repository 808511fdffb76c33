"""The sans-I/O core shared by both backends.

Every store operation is written once, as a *program*: a generator that yields
:class:`Query` objects and receives each query's rows back. The SQLite writer thread
and the PostgreSQL connection drive the same programs, so the two backends cannot
drift apart in semantics; a :class:`Dialect` supplies the few spellings that differ
(placeholders, row locks, list parameters).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

import orjson
from ulid import ULID

from ._bodies import pack, unpack
from ._records import Execution, InputRequest, Session

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement, written with ``?`` placeholders. ``many``: executemany, no rows.

    ``check``: the program does not need the rows, only to have them validated (it raises
    the unit's error). A driver may then send later statements before the rows arrive and
    run the check once they do, before COMMIT (PostgreSQL pipelines them: one round trip
    for many statements); the program receives ``[]``.
    """

    sql: str
    params: Sequence[Any] = ()
    many: bool = False
    check: Callable[[list[Row]], None] | None = None


Program = Generator[Query, list[Row], T]


@dataclass
class Effects:
    """What a committed unit changed that the outside world must hear about."""

    #: session_id -> highest seq appended, for ``watch()`` wake-ups.
    wakeups: dict[str, int] = field(default_factory=dict)


class Dialect:
    """SQLite spelling; :class:`PostgresDialect` overrides what differs."""

    name = "sqlite"
    #: Row locks: a no-op on SQLite, whose single writer already serializes everything.
    for_update = ""
    skip_locked = ""

    def sql(self, text: str) -> str:
        return text

    def in_(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def encode_body(self, body: Any) -> str | bytes:
        """A stored action body: compressed on SQLite (``_bodies``), JSON text here."""
        return pack(dumps(body))

    def insert_actions(self, rows: list[tuple[str, int, str, str, str | bytes]]) -> Query:
        # `actions` is a view on SQLite (migration 4): the rows go to action_log, keyed by
        # the session's integer sk.
        return Query(
            "INSERT INTO action_log (sk, seq, action_id, type, body) "
            "VALUES ((SELECT sk FROM sessions WHERE session_id = ?), ?, ?, ?, ?)",
            rows,
            many=True,
        )

    def move_last_seqs(self, moved: list[tuple[int, str]]) -> Query:
        return Query("UPDATE sessions SET last_seq = ? WHERE session_id = ?", moved, many=True)

    def pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[str, list[Any]]:
        """A derived table ``v(column1, column2)`` of string pairs, to JOIN against.

        (A JOIN, not ``(a, b) IN (VALUES ...)``: SQLite plans the latter as a table scan.)
        """
        values = ",".join(["(?,?)"] * len(pairs))
        return f"(VALUES {values}) AS v", [v for pair in pairs for v in pair]


class PostgresDialect(Dialect):
    name = "postgres"
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def in_(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def encode_body(self, body: Any) -> str | bytes:
        return dumps(body)

    # One statement over arrays instead of executemany: a batch of a thousand appends is
    # one INSERT for the server to plan and one message for the client to build.
    def insert_actions(self, rows: list[tuple[str, int, str, str, str | bytes]]) -> Query:
        cols = [list(c) for c in zip(*rows, strict=True)]
        return Query(
            "INSERT INTO actions (session_id, seq, action_id, type, body) "
            "SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[])",
            cols,
            check=_no_check,
        )

    def move_last_seqs(self, moved: list[tuple[int, str]]) -> Query:
        return Query(
            "UPDATE sessions s SET last_seq = v.seq "
            "FROM unnest(?::bigint[], ?::text[]) AS v(seq, sid) WHERE s.session_id = v.sid",
            [[m[0] for m in moved], [m[1] for m in moved]],
            check=_no_check,
        )

    def pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[str, list[Any]]:
        return (
            "unnest(?::text[], ?::text[]) AS v(column1, column2)",
            [[p[0] for p in pairs], [p[1] for p in pairs]],
        )


def _no_check(rows: list[Row]) -> None:
    """For a statement whose rows nobody needs: lets a pipelining driver not wait for it."""


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains a literal '?' or '%', so a plain replace is exact.
    assert "%" not in text, text
    return text.replace("?", "%s")


# Types orjson would write but the standard library refuses are handed to the latter,
# so what the store accepts does not depend on which encoder ran.
_ORJSON_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(value: Any) -> str:
    """Compact JSON text (UTF-8, no spaces): every action body goes through here, and
    orjson writes one ~10x faster than the standard library (a third of the SQLite
    writer's Python with 100 concurrent appenders). What orjson refuses (integers past
    64 bits, non-string keys, lone surrogates, other types) goes to the standard library,
    whose text differs only in how some floats are spelled (``1e-07`` / ``1e-7``)."""
    try:
        return orjson.dumps(value, option=_ORJSON_OPTS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def load_body(stored: str | bytes) -> Any:
    """A stored action body's value: JSON text, or SQLite's compressed BLOB (``_bodies``)."""
    return json.loads(unpack(stored))


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def new_id(prefix: str, now: float) -> str:
    """A type-prefixed ULID whose time part comes from the injected clock."""
    return f"{prefix}_{ULID.from_timestamp(now)}"


# -- row mapping -------------------------------------------------------------------------

SESSION_COLS = (
    "session_id, created_at, workspace_id, principal_id, title, plugin_digest, "
    "deployment_digest, metadata, last_seq"
)


def session_from_row(r: Row) -> Session:
    return Session(
        session_id=r[0],
        created_at=r[1],
        workspace_id=r[2],
        principal_id=r[3],
        title=r[4],
        plugin_digest=r[5],
        deployment_digest=r[6],
        metadata=loads(r[7]),
        last_seq=r[8],
    )


EXEC_COLS = (
    "execution_id, session_id, turn_id, status, created_at, principal_id, trigger, input, "
    "retry_of, snapshot_digest, deadline_at, owner, epoch, attempt, lease_expires_at, "
    "cancel_requested, result, error, finished_at"
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
    )


INPUT_COLS = (
    "request_id, session_id, execution_id, turn_id, status, payload, created_at, "
    "tool_call_id, resolution, answered_by_principal, answered_by_client, expires_at, "
    "resolved_at"
)


def input_request_from_row(r: Row) -> InputRequest:
    return InputRequest(
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
    """One buffered write. Subclasses are frozen dataclasses; ``run`` is their program."""

    __slots__ = ()

    def run(self, d: Dialect, fx: Effects) -> Program[Any]:  # pragma: no cover - abstract
        raise NotImplementedError
