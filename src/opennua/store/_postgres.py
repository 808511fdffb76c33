"""PostgreSQL backend (psycopg 3, async pool).

Writes run on up to ``workers`` pooled connections at once. A worker takes either a
run of plain appends (merged into one set-based program, one transaction: group commit
on the client side) or a single other unit (its own transaction, so a unit that waits
on a row lock never holds up unrelated units). PostgreSQL itself groups the WAL flushes
of concurrent commits. Appends lock their session rows, in session_id order, before
reading ``last_seq``, so append order equals commit order and batches cannot deadlock
with each other; rare deadlocks with hand-built units are retried.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from . import _pg_fast
from ._base import Store
from ._blobs import BlobStore
from ._errors import CommitUnknown, Conflict, StoreError, Unavailable
from ._exec_ops import unit_program
from ._log_ops import Append, append_program
from ._migrations import migrate_postgres
from ._sql import Effects, PostgresDialect, Program, dumps, loads
from ._unit import Unit
from ._watch import Watcher, WatchHub

T = TypeVar("T")
log = logging.getLogger(__name__)

_DIALECT = PostgresDialect()
_CHANNEL = "nua_actions"
_MAX_BATCH = 1000
_RETRIES = 5
_NOTIFY_BYTES = 7000  # NOTIFY payloads must stay under 8000 bytes

AsyncConn = psycopg.AsyncConnection[Any]


@dataclass(slots=True)
class _Pending:
    unit: Unit
    future: asyncio.Future[list[Any]]


class _Retry(Exception):
    """A deadlock or serialization failure: the transaction was rolled back; run it again."""


def _translate(exc: psycopg.Error) -> Exception:
    if isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return _Retry(str(exc))
    if isinstance(exc, psycopg.IntegrityError):
        return Conflict("row", "", str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return Unavailable(f"postgresql: {exc}")
    return StoreError(f"postgresql: {exc}")


async def drive(
    conn: AsyncConn, program: Program[T], pipeline: psycopg.AsyncPipeline | None = None
) -> T:
    """Run a program on one connection, translating driver errors at this edge.

    With ``pipeline`` (inside ``conn.pipeline()``) statements whose rows the program does
    not need (``many``, or a ``check``) are sent without waiting; their checks run when
    their rows arrive, at the next read or at :func:`verify`. A unit then costs a round
    trip per read it really needs instead of one per statement.
    """
    rows: list[Any] | None = None
    checks: list[tuple[psycopg.AsyncCursor[Any], Any]] = []
    try:
        while True:
            query = program.send(rows)  # type: ignore[arg-type]
            sql = _DIALECT.sql(query.sql)
            try:
                if query.many:
                    cur = conn.cursor()
                    await cur.executemany(sql, query.params)
                    rows = []
                elif query.check is not None and pipeline is not None:
                    checks.append((await conn.execute(sql, query.params), query.check))
                    rows = []
                else:
                    cur = await conn.execute(sql, query.params)
                    if pipeline is not None:
                        await pipeline.sync()  # the rows are needed now
                    rows = await cur.fetchall() if cur.description else []
                    if query.check is not None:
                        query.check(rows)
                        rows = []
            except psycopg.Error as exc:
                program.close()
                raise _translate(exc) from exc
            except StoreError:
                program.close()
                raise
    except StopIteration as stop:
        await verify(pipeline, checks)
        return stop.value  # type: ignore[no-any-return]


async def verify(
    pipeline: psycopg.AsyncPipeline | None, checks: list[tuple[psycopg.AsyncCursor[Any], Any]]
) -> None:
    """Wait for the deferred statements and run their checks, in order."""
    try:
        if pipeline is not None:
            await pipeline.sync()
        for cur, check in checks:
            check(await cur.fetchall() if cur.description else [])
    except psycopg.Error as exc:
        raise _translate(exc) from exc


IDLE_IN_TRANSACTION_MS = 5000


class PostgresStore(Store):
    #: Send the units the server-side functions know as one call (see _pg_fast). The
    #: contract suite also runs with this off, so both paths meet the same contract.
    fast_path = True

    def __init__(
        self, url: str, pool: AsyncConnectionPool[AsyncConn], blobs: BlobStore | None, workers: int
    ) -> None:
        super().__init__(blobs)
        self._url = url
        self._pool = pool
        self._workers = workers
        self._active = 0
        self._queue: collections.deque[_Pending] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._hub = WatchHub()
        self._listener: AsyncConn | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(cls, url: str, blobs: BlobStore | None, *, workers: int = 4) -> PostgresStore:
        # A unit never waits on its client mid-transaction, so an open transaction that
        # idles for seconds belongs to a frozen or partitioned process (SIGSTOP, a VM pause).
        # Its row locks would hide the execution from every other supervisor's
        # `FOR UPDATE SKIP LOCKED` claim forever; the server ends such a session instead.
        options = f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        pool: AsyncConnectionPool[AsyncConn] = AsyncConnectionPool(
            url,
            min_size=2,
            max_size=workers + 4,
            kwargs={"autocommit": True, "options": options},
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=10)
            async with pool.connection() as conn:
                await migrate_postgres(conn)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            await pool.close()
            raise Unavailable(f"cannot open {_redact(url)}: {exc}") from exc
        except BaseException:
            await pool.close()
            raise
        store = cls(url, pool, blobs, workers)
        try:
            await store._start_listener()
        except BaseException:
            await store.close()
            raise
        return store

    # -- writes ----------------------------------------------------------------------

    async def _commit(self, unit: Unit) -> list[Any]:
        if self._closed:
            raise StoreError("the store is closed")
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(unit, future))
        if self._active < self._workers:
            self._active += 1
            task = asyncio.create_task(self._worker())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    def _take(self) -> list[_Pending]:
        if not self._queue[0].unit.single_append:
            return [self._queue.popleft()]
        batch: list[_Pending] = []
        while self._queue and self._queue[0].unit.single_append and len(batch) < _MAX_BATCH:
            batch.append(self._queue.popleft())
        return batch

    async def _worker(self) -> None:
        try:
            while self._queue:
                batch = [p for p in self._take() if not p.future.cancelled()]
                if not batch:
                    continue
                units = [p.unit for p in batch]
                try:
                    outcomes, wakeups = await self._run_with_retries(units)
                except Exception as exc:  # never strand a waiting caller
                    outcomes, wakeups = (
                        [Unavailable(f"postgresql writer failed: {exc!r}")] * len(units),
                        {},
                    )
                for pending, outcome in zip(batch, outcomes, strict=True):
                    if pending.future.done():
                        continue
                    if isinstance(outcome, BaseException):
                        pending.future.set_exception(outcome)
                    else:
                        pending.future.set_result(outcome)
                del wakeups  # LISTEN/NOTIFY delivers them, to this process and all others
        finally:
            self._active -= 1

    async def _run_with_retries(self, units: list[Unit]) -> tuple[list[Any], dict[str, int]]:
        for attempt in range(_RETRIES):
            try:
                async with self._pool.connection() as conn:
                    return await self._run_tx(conn, units)
            except _Retry:
                if attempt == _RETRIES - 1:
                    raise
                await asyncio.sleep(0.005 * (attempt + 1))
            except PoolTimeout as exc:
                raise Unavailable(f"postgresql pool: {exc}") from exc
        raise AssertionError("unreachable")

    async def _run_tx(self, conn: AsyncConn, units: list[Unit]) -> tuple[list[Any], dict[str, int]]:
        if not self.fast_path:
            return await self._run_programs(conn, units)
        if units[0].single_append:
            items = []
            for unit in units:
                (op,) = unit.ops
                assert isinstance(op, Append)
                items.append((op.session_id, op.actions))
            prepared = _pg_fast.append_params(items)
            if prepared is not None and len(prepared[1]) == 1:
                # One session (e.g. a sequential appender): the single-session function
                # behind nua_unit is cheaper than the set-based batch.
                merged = Unit(None, tuple(op for unit in units for op in unit.ops))
                unit_params = _pg_fast.unit_params(merged)
                if unit_params is not None:
                    (outcome,), _ = await self._run_fast(
                        conn, [merged], _pg_fast.UNIT_SQL, unit_params, None
                    )
                    if isinstance(outcome, BaseException):
                        return [outcome] * len(units), {}
                    return [[r] for r in outcome], {}
            if prepared is not None:
                params, order = prepared
                return await self._run_fast(
                    conn, units, _pg_fast.APPEND_SQL, params, (items, order)
                )
        else:
            unit_args = _pg_fast.unit_params(units[0])
            if unit_args is not None:
                return await self._run_fast(conn, units, _pg_fast.UNIT_SQL, unit_args, None)
        return await self._run_programs(conn, units)

    async def _run_fast(
        self,
        conn: AsyncConn,
        units: list[Unit],
        sql: str,
        params: list[Any],
        batch: tuple[list[tuple[str, Any]], Any] | None,
    ) -> tuple[list[Any], dict[str, int]]:
        """One call, one round trip: autocommit makes the call its own transaction (the
        function NOTIFYs, so wake-ups are delivered only if it commits)."""
        try:
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
        except psycopg.Error as exc:
            mine = _pg_fast.raised(exc, units[0])
            if mine is not None:
                return [mine] * len(units), {}
            if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
                # The connection broke mid-call: whether the server committed is unknowable.
                return [_commit_unknown(u, exc) for u in units], {}
            translated = _translate(exc)
            if isinstance(translated, StoreError):
                return [translated] * len(units), {}
            raise translated from exc
        assert row is not None
        seqs = row[0]
        if batch is not None:
            results = _pg_fast.append_outcomes(*batch, seqs)
            return [r if isinstance(r, StoreError) else [r] for r in results], {}
        return [_pg_fast.unit_results(units[0], seqs)], {}

    async def _run_programs(
        self, conn: AsyncConn, units: list[Unit]
    ) -> tuple[list[Any], dict[str, int]]:
        fx = Effects()
        try:
            # Pipelined: BEGIN and every statement whose rows are only checked go out
            # without waiting (see drive); the checks all pass before COMMIT is sent.
            async with conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                if units[0].single_append:
                    items = []
                    for unit in units:
                        (op,) = unit.ops
                        assert isinstance(op, Append)
                        items.append((op.session_id, op.actions))
                    results = await drive(conn, append_program(_DIALECT, items, fx), pipeline)
                    outcomes: list[Any] = [r if isinstance(r, StoreError) else [r] for r in results]
                else:
                    (unit,) = units
                    program = unit_program(_DIALECT, unit.fence, unit.ops, fx)
                    outcomes = [await drive(conn, program, pipeline)]
                await self._notify(conn, fx.wakeups)
                await verify(pipeline, [])
        except psycopg.Error as exc:
            await _rollback(conn)
            translated = _translate(exc)
            if isinstance(translated, StoreError):
                return [translated] * len(units), {}
            raise translated from exc
        except StoreError as exc:
            await _rollback(conn)
            return [exc] * len(units), {}
        except BaseException:
            await _rollback(conn)
            raise
        try:
            await conn.execute("COMMIT")
        except psycopg.Error as exc:
            # Whether the server committed before the connection broke is unknowable.
            return [_commit_unknown(u, exc) for u in units], {}
        return outcomes, fx.wakeups

    async def _notify(self, conn: AsyncConn, wakeups: dict[str, int]) -> None:
        # Sent inside the transaction: PostgreSQL delivers it only if the COMMIT lands.
        payloads, current = [], []
        for item in wakeups.items():
            current.append(item)
            if len(current) >= 100:
                payloads.append(dumps(current))
                current = []
        if current:
            payloads.append(dumps(current))
        for payload in payloads:
            assert len(payload.encode()) < _NOTIFY_BYTES
            try:
                await conn.execute("SELECT pg_notify(%s, %s)", (_CHANNEL, payload))
            except psycopg.Error as exc:
                raise _translate(exc) from exc

    # -- reads -----------------------------------------------------------------------

    async def _read(self, program: Program[T]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        try:
            async with self._pool.connection() as conn:
                return await drive(conn, program)
        except PoolTimeout as exc:
            raise Unavailable(f"postgresql pool: {exc}") from exc

    # -- wake-ups --------------------------------------------------------------------

    def watch(self) -> Watcher:
        return self._hub.subscribe()

    async def _start_listener(self) -> None:
        # LISTEN is established before open() returns, so a watch() taken afterwards
        # never misses a commit that happens after it.
        self._listener = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        await self._listener.execute(f"LISTEN {_CHANNEL}")
        self._listen_task = asyncio.create_task(self._listen(self._listener))

    async def _listen(self, conn: AsyncConn) -> None:
        while not self._closed:
            try:
                async for note in conn.notifies():
                    self._hub.publish({sid: int(seq) for sid, seq in loads(note.payload)})
            except psycopg.OperationalError as exc:
                if self._closed:
                    return
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                await asyncio.sleep(0.5)
                with contextlib.suppress(psycopg.OperationalError):
                    conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
                    await conn.execute(f"LISTEN {_CHANNEL}")
                    # Wake-ups sent while disconnected are lost; watchers that need
                    # certainty re-read on a timer (a wake-up is only a hint).
                    self._listener = conn

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._listen_task is not None:
            self._listen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await self._listen_task
        if self._listener is not None:
            with contextlib.suppress(psycopg.Error):
                await self._listener.close()
        await self._pool.close()
        self._hub.close()


async def _rollback(conn: AsyncConn) -> None:
    with contextlib.suppress(psycopg.Error):
        await conn.execute("ROLLBACK")


def _commit_unknown(unit: Unit, exc: BaseException) -> CommitUnknown:
    execution_id, epoch = (unit.fence[0], unit.fence[1]) if unit.fence else ("", -1)
    error = CommitUnknown(f"postgresql COMMIT failed: {exc}", execution_id, epoch)
    error.__cause__ = exc
    return error


def _redact(url: str) -> str:
    head, sep, tail = url.rpartition("@")
    return f"{head.split('//', 1)[0]}//***@{tail}" if sep else url
