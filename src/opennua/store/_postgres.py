"""PostgreSQL backend (psycopg 3, async pool).

Writes run on up to ``workers`` pooled connections at once. A worker takes either a
run of plain appends (merged into one call: group commit on the client side) or a
single other unit (its own transaction, so a unit that waits on a row lock never holds
up unrelated units). PostgreSQL itself groups the WAL flushes of concurrent commits.
Appends lock their session rows, in session_id order, before reading ``last_seq``, so
append order equals commit order and batches cannot deadlock with each other; rare
deadlocks with hand-built units are retried.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from . import _pg_calls
from ._base import Store
from ._blobs import BlobStore
from ._blobs_pg import PostgresBlobStore
from ._errors import CommitUnknown, StoreError, Unavailable, WriteConflict, not_utf8, unit_failure
from ._json import loads
from ._migrations import migrate_postgres
from ._pg_calls import RIGHTS_CHANNEL, PostgresDialect
from ._sql import Effects, Program
from ._unit import Pending, Unit, settle, unit_program
from ._watch import Watcher, WatchHub

T = TypeVar("T")
log = logging.getLogger(__name__)

_DIALECT = PostgresDialect()
_CHANNEL = "nua_actions"
_MAX_BATCH = 1000
_RETRIES = 5

AsyncConn = psycopg.AsyncConnection[Any]


class _Retry(Exception):
    """A deadlock or serialization failure: the transaction was rolled back; run it again."""


def _translate(exc: psycopg.Error) -> Exception:
    mine = _pg_calls.raised(exc)
    if mine is not None:
        return mine
    if isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return _Retry(str(exc))
    if isinstance(exc, psycopg.IntegrityError):
        return WriteConflict("row", "", str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return Unavailable(f"postgresql: {exc}")
    return StoreError(f"postgresql: {exc}")


async def drive(
    conn: AsyncConn, program: Program[T], pipeline: psycopg.AsyncPipeline | None = None
) -> T:
    """Run a program on one connection, translating driver errors at this edge.

    Inside ``conn.pipeline()`` each statement is synced at once, so only the BEGIN before
    the first one rides along: nothing may be queued behind a statement that can fail,
    since PostgreSQL skips what follows an error in a pipeline and psycopg would still
    count a statement it prepared there as prepared.
    """
    rows: list[Any] | None = None
    try:
        while True:
            query = program.send(rows)  # type: ignore[arg-type]
            sql = _DIALECT.sql(query.sql)
            try:
                if query.many:
                    await conn.cursor().executemany(sql, query.params)
                    cur = None
                else:
                    cur = await conn.execute(sql, query.params)
                if pipeline is not None:
                    await pipeline.sync()
                rows = await cur.fetchall() if cur is not None and cur.description else []
            except psycopg.Error as exc:
                program.close()
                raise _translate(exc) from exc
            except UnicodeEncodeError as exc:  # a parameter the ops did not check
                program.close()
                raise not_utf8(exc, "a value") from exc
            except StoreError:
                program.close()
                raise
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


IDLE_IN_TRANSACTION_MS = 5000


class PostgresStore(Store):
    def __init__(
        self, url: str, pool: AsyncConnectionPool[AsyncConn], blobs: BlobStore, workers: int
    ) -> None:
        super().__init__(blobs)
        self._url = url
        self._pool = pool
        self._workers = workers
        self._active = 0
        self._queue: collections.deque[Pending] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._hub = WatchHub()
        self._listener: AsyncConn | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(cls, url: str, blobs: BlobStore | None, *, workers: int = 4) -> PostgresStore:
        """``blobs=None`` keeps blobs in the database (``_blobs_pg``)."""
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
        store = cls(url, pool, blobs or PostgresBlobStore(pool), workers)
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
        self._queue.append(Pending(unit, future))
        if self._active < self._workers:
            self._active += 1
            task = asyncio.create_task(self._worker())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    def _take(self) -> list[Pending]:
        if not self._queue[0].unit.single_append:
            return [self._queue.popleft()]
        batch: list[Pending] = []
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
                settle(batch, outcomes)
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
        if units[0].single_append:
            # The actions were encoded and checked when each caller handed them over, so
            # nothing here can fail one caller for another's value.
            items, args = _pg_calls.batch_call(units)
            row = await self._run_call(conn, units, args)
            if isinstance(row, list):
                return row, {}
            outcomes = _pg_calls.append_outcomes(items, row)
            return [r if isinstance(r, StoreError) else [r] for r in outcomes], {}
        (unit,) = units
        ops = _pg_calls.journal_unit(unit)
        if ops is None:
            return await self._run_programs(conn, unit)
        try:
            args = _pg_calls.journal_call(unit.fence, ops)
        except StoreError as exc:  # a value it cannot pass (a ledger result, a time)
            return [exc], {}
        row = await self._run_call(conn, units, args)
        if isinstance(row, list):
            return row, {}
        return [_pg_calls.journal_results(ops, row)], {}

    async def _run_call(
        self, conn: AsyncConn, units: list[Unit], params: list[Any]
    ) -> tuple[Any, ...] | list[Any]:
        """One call, one round trip: autocommit makes the call its own transaction (the
        function NOTIFYs, so wake-ups are delivered only if it commits). Returns the
        call's row, or every unit's outcome if it failed."""
        try:
            cur = await conn.execute(_DIALECT.sql(_pg_calls.UNIT_SQL), params)
            row: tuple[Any, ...] | None = await cur.fetchone()
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
                # The connection broke mid-call: whether the server committed is unknowable.
                return [_commit_unknown(u, exc) for u in units]
            translated = _translate(exc)
            if isinstance(translated, StoreError):
                return [translated] * len(units)
            raise translated from exc
        except UnicodeEncodeError as exc:  # a parameter the ops did not check
            return [unit_failure(exc, "postgresql")] * len(units)
        assert row is not None
        return row

    async def _run_programs(self, conn: AsyncConn, unit: Unit) -> tuple[list[Any], dict[str, int]]:
        fx = Effects()
        try:
            # Pipelined: BEGIN goes out with the first statement (see drive).
            async with conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                program = unit_program(_DIALECT, unit.fence, unit.ops, fx)
                outcome = await drive(conn, program, pipeline)
        except psycopg.Error as exc:
            await _rollback(conn)
            translated = _translate(exc)
            if isinstance(translated, StoreError):
                return [translated], {}
            raise translated from exc
        except Exception as exc:  # a store error, or a bug: this unit fails, alone
            await _rollback(conn)
            return [unit_failure(exc, "postgresql")], {}
        except BaseException:
            await _rollback(conn)
            raise
        try:
            await conn.execute("COMMIT")
        except psycopg.Error as exc:
            # Whether the server committed before the connection broke is unknowable.
            return [_commit_unknown(unit, exc)], {}
        return [outcome], fx.wakeups

    async def check_writable(self) -> None:
        timeout = self.check_writable_timeout
        if self._closed:
            raise Unavailable("the store is closed")
        try:
            # A transaction that gets a transaction id must write a commit record: a
            # standby refuses it, a server that cannot write its WAL cannot finish it.
            # The store writes in the default access mode, so a read-only default is as
            # unwritable as a standby.
            async with (
                asyncio.timeout(timeout),
                self._pool.connection() as conn,
                conn.transaction(),
            ):
                cur = await conn.execute(
                    "SELECT txid_current(), current_setting('transaction_read_only')"
                )
                row = await cur.fetchone()
        except TimeoutError as exc:
            raise Unavailable(f"postgresql: no write transaction in {timeout} s") from exc
        except (psycopg.Error, PoolTimeout) as exc:
            raise Unavailable(f"postgresql: {exc}") from exc
        if row is None or row[1] != "off":
            raise Unavailable("postgresql: the database is read-only")

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

    def _rights_changed(self, *principal_ids: str) -> None:
        pass  # the op's NOTIFY reaches every process, this one included (`_listen`)

    async def _start_listener(self) -> None:
        # LISTEN is established before open() returns, so a watch() taken afterwards
        # never misses a commit that happens after it.
        self._listener = await self._listening()
        self._listen_task = asyncio.create_task(self._listen(self._listener))

    async def _listening(self) -> AsyncConn:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        try:
            await conn.execute(f"LISTEN {_CHANNEL}")
            await conn.execute(f"LISTEN {RIGHTS_CHANNEL}")
        except BaseException:
            # Cancelled by close() mid-reconnect, or the server went away again: an open
            # connection left to the collector is a ResourceWarning (an error in tests).
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            raise
        return conn

    async def _listen(self, conn: AsyncConn) -> None:
        while not self._closed:
            try:
                async for note in conn.notifies():
                    if note.channel == RIGHTS_CHANNEL:
                        self._rights.publish({note.payload: 1})
                    else:
                        self._hub.publish({sid: int(seq) for sid, seq in loads(note.payload)})
            except psycopg.OperationalError as exc:
                if self._closed:
                    return
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                with contextlib.suppress(psycopg.Error):
                    await conn.close()
                await asyncio.sleep(0.5)
                with contextlib.suppress(psycopg.OperationalError):
                    conn = await self._listening()
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
        await self._blobs.close()
        await self._pool.close()
        self._hub.close()
        self._rights.close()


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
