"""SQLite backend: one writer thread with group commit, reads on their own connections.

Group commit: callers hand whole units to a queue; the writer thread takes everything
queued, runs it inside ONE ``BEGIN IMMEDIATE`` transaction (each unit in its own
SAVEPOINT, so a unit whose precondition fails is rolled back alone), COMMITs once with
``synchronous=FULL`` (one fsync for the lot), and only then wakes the callers. While it
waits on the disk, new units queue up: the batch size adapts to the load by itself.
Runs of plain appends are merged into one set-based append (a few statements for the
whole run instead of a few per caller), which is where most of the throughput comes from.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ._base import Store
from ._blobs import BlobStore
from ._blobs_file import private
from ._errors import CommitUnknown, StoreError, Unavailable, WriteConflict, not_utf8, unit_failure
from ._log import Append
from ._migrations import migrate_sqlite
from ._sql import Effects, Program
from ._sqlite_ops import SQLiteDialect
from ._unit import Pending, Unit, settle, unit_program
from ._watch import Watcher, WatchHub

T = TypeVar("T")
log = logging.getLogger(__name__)

_DIALECT = SQLiteDialect()
_MAX_BATCH = 2000
_BUSY_TIMEOUT_MS = 10_000
_WAL_AUTOCHECKPOINT_PAGES = 10_000
# How often the background checkpointer copies committed WAL frames into the database.
_CHECKPOINT_INTERVAL_S = 0.05
# See _preallocate_wal: a little more than the WAL reaches between two checkpoints.
_WAL_PREALLOC_BYTES = 44 * 1024 * 1024


def connect(path: str | Path, *, readonly: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    # FULL: the WAL is fsynced at every COMMIT, so an acknowledged append survives power loss.
    conn.execute("PRAGMA synchronous = FULL")
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:
        # Many sessions appending at once dirty many index pages per commit; with the
        # default (1,000 pages) the writer stops to checkpoint every few batches. 10,000
        # pages (~40 MiB of WAL) amortizes that over far more commits.
        conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_AUTOCHECKPOINT_PAGES}")
        # A unit's SAVEPOINT keeps a copy of every page it changes (a statement journal);
        # on disk that spilled to a temp file past 64 KiB, a write per page.
        conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _preallocate_wal(conn: sqlite3.Connection, path: str | Path) -> None:
    """Make the WAL file big enough up front that commits overwrite it instead of growing it.

    A COMMIT fsyncs the WAL. While the WAL grows, every fsync also has to commit the
    file system's metadata for the new blocks (on ext4 a journal commit: a second flush),
    which made a commit 1.3-1.8x slower until the WAL reached its checkpointed steady
    size, i.e. for the first ~40 MB written after every open (SQLite deletes the WAL when
    the last connection closes, which is why this runs on the writer's connection).
    SQLite has no knob for it that Python can reach, so this writes a throwaway
    transaction big enough to spill its pages into the WAL and rolls it back: the frames
    are allocated, none is committed (a crash here leaves nothing to recover), and later
    commits reuse them. Best effort: any error just skips it.
    """
    wal = Path(f"{path}-wal")
    try:
        have = wal.stat().st_size
    except OSError:
        have = 0
    if have >= _WAL_PREALLOC_BYTES:
        return
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    rows = (_WAL_PREALLOC_BYTES - have) // page_size
    (cache_size,) = conn.execute("PRAGMA cache_size").fetchone()
    try:
        conn.execute("PRAGMA cache_size = 64")  # spill early: the pages go to the WAL, not RAM
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE nua_wal_prealloc (b BLOB)")
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO nua_wal_prealloc SELECT zeroblob(?) FROM n",
                (rows, page_size - 200),
            )
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


def _private_database(path: Path) -> None:
    """Make the database file 0600 (creating it if need be) before SQLite opens it.

    SQLite creates a new database file 0644 minus the umask, but gives its -wal and -shm
    files the database file's own mode, so a private database keeps them private too.
    Files an older version left readable are tightened; someone else's are left alone.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm", "-journal"):
        private(Path(f"{path}{suffix}"), 0o600)


def drive(conn: sqlite3.Connection, program: Program[T]) -> T:
    """Run a program to completion, translating driver errors at this edge."""
    rows: list[Any] | None = None
    try:
        while True:
            query = program.send(rows)  # type: ignore[arg-type]
            try:
                if query.many:
                    conn.executemany(query.sql, query.params)
                    rows = []
                else:
                    rows = conn.execute(query.sql, query.params).fetchall()
            except sqlite3.IntegrityError as exc:
                program.close()
                raise WriteConflict("row", "", str(exc)) from exc
            except sqlite3.Error as exc:
                program.close()
                raise Unavailable(f"sqlite: {exc}") from exc
            except UnicodeEncodeError as exc:  # a parameter the ops did not check
                program.close()
                raise not_utf8(exc, "a value") from exc
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class SQLiteStore(Store):
    def __init__(self, path: Path, blobs: BlobStore, *, readers: int = 2) -> None:
        super().__init__(blobs)
        self.path = path
        self._loop = asyncio.get_running_loop()
        self._queue: collections.deque[Pending] = collections.deque()
        # Units submitted during one event-loop iteration, handed to the writer together
        # by one _flush callback (see _commit).
        self._outbox: list[Pending] = []
        self._flush_scheduled = False
        self._cond = threading.Condition()
        self._stopping = False
        self._closed = False
        #: Set if the writer thread ended on an error: every write fails at once.
        self._writer_error: str | None = None
        self._hub = WatchHub()
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._inline: sqlite3.Connection | None = None  # the loop thread's (see _read)
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="nua-sqlite-read")
        self._writer = threading.Thread(
            target=self._writer_main, args=(connect(path),), name="nua-sqlite-writer", daemon=True
        )
        self._writer.start()
        self._checkpoints = threading.Event()  # set: stop checkpointing
        self._checkpointer = threading.Thread(
            target=self._checkpointer_main, name="nua-sqlite-checkpoint", daemon=True
        )
        self._checkpointer.start()

    @classmethod
    async def open(cls, path: Path, blobs: BlobStore) -> SQLiteStore:
        def migrate() -> None:
            _private_database(path)
            conn = connect(path)
            try:
                migrate_sqlite(conn)
            finally:
                conn.close()

        try:
            await asyncio.to_thread(migrate)
        except (sqlite3.Error, OSError) as exc:
            raise Unavailable(f"cannot open {path}: {exc}") from exc
        return cls(path, blobs)

    # -- writes ----------------------------------------------------------------------

    async def _commit(self, unit: Unit) -> list[Any]:
        if self._stopping:
            raise StoreError("the store is closed")
        if self._writer_error is not None:
            raise Unavailable(self._writer_error)
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        # Not straight to the writer: callers woken by one COMMIT resume in the same loop
        # iteration and submit their next units one after another. Handing each over as it
        # comes let the writer start a transaction on the first few and fsync them alone
        # while the rest queued behind it. _flush runs once the loop has run everything
        # that was ready, so they reach the writer as one batch (and one lock round trip).
        self._outbox.append(Pending(unit, future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._outbox:
            return
        batch, self._outbox = self._outbox, []
        if self._writer_error is not None:
            self._fail(batch)
            return
        with self._cond:
            self._queue.extend(batch)
            self._cond.notify()

    def _writer_main(self, conn: sqlite3.Connection) -> None:
        batch: list[Pending] = []
        try:
            # Here, not in open(): SQLite deletes the WAL when its last connection closes.
            _preallocate_wal(conn, self.path)
            while True:
                with self._cond:
                    while not self._queue and not self._stopping:
                        self._cond.wait()
                    if not self._queue:
                        return
                    n = min(len(self._queue), _MAX_BATCH)
                    batch = [self._queue.popleft() for _ in range(n)]
                live = [p for p in batch if not p.future.cancelled()]
                try:
                    outcomes, wakeups = self._run_batch(conn, [p.unit for p in live])
                except BaseException as exc:  # never let the thread die with callers waiting
                    _abort(conn)
                    failure = Unavailable(f"sqlite writer failed: {exc!r}")
                    outcomes, wakeups = [failure] * len(live), {}
                self._loop.call_soon_threadsafe(self._settle, live, outcomes, wakeups)
                batch = []
        except BaseException as exc:
            # Ending on an error (a bug, or the event loop is gone): whoever waits, and
            # whoever writes from now on, gets an error at once instead of hanging.
            log.error("the SQLite writer stopped", exc_info=True)
            self._writer_error = f"the sqlite writer stopped: {exc!r}"
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self._loop.call_soon_threadsafe(self._fail, batch)
        finally:
            conn.close()

    def _fail(self, batch: list[Pending]) -> None:
        """Fail ``batch`` and everything still queued: the writer is gone."""
        with self._cond:
            queued = list(self._queue)
            self._queue.clear()
        failure = self._writer_error or "the sqlite writer stopped"
        for pending in [*batch, *queued, *self._outbox]:
            if not pending.future.done():
                pending.future.set_exception(Unavailable(failure))
        self._outbox = []

    def _run_batch(
        self, conn: sqlite3.Connection, units: list[Unit]
    ) -> tuple[list[Any], dict[str, int]]:
        if not units:
            return [], {}
        # First without a SAVEPOINT per unit: each made SQLite copy every page its unit
        # changed into a statement journal and cost two statements more, a fifth of the
        # writer's time for a batch of webhook units. Units rarely fail; when one does,
        # the whole transaction is rolled back and the batch runs again with SAVEPOINTs,
        # so that unit fails alone, as before.
        for savepoints in (False, True):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                return [Unavailable(f"sqlite: {exc}")] * len(units), {}
            try:
                done = self._run_units(conn, units, savepoints)
            except Exception as exc:
                # Something failed outside any unit (a SAVEPOINT that could not be taken or
                # released, a bug here): none of the batch may commit, and the next batch
                # must find no transaction open.
                _abort(conn)
                return [unit_failure(exc, "sqlite")] * len(units), {}
            if done is not None:
                return done
            _abort(conn)  # a unit failed and took no SAVEPOINT: again, with them
        raise AssertionError("unreachable: the run with SAVEPOINTs always ends")

    def _run_units(
        self, conn: sqlite3.Connection, units: list[Unit], savepoints: bool
    ) -> tuple[list[Any], dict[str, int]] | None:
        """Run the batch in the open transaction and COMMIT. Without `savepoints`, None
        when a unit fails among others (the caller rolls back and runs them again with
        SAVEPOINTs); a batch that is one unit, or one run of appends, fails as a whole."""
        outcomes: list[Any] = [None] * len(units)
        wakeups: dict[str, int] = {}
        i = 0
        while i < len(units):
            if units[i].single_append:
                j = i
                while j < len(units) and units[j].single_append:
                    j += 1
                failure = self._run_appends(conn, units, i, j, outcomes, wakeups, savepoints)
                if failure is not None:
                    if i == 0 and j == len(units):
                        # The whole batch (the common case under load): its ROLLBACK is
                        # the undo, and every unit in it gets the error.
                        return _rolled_back(conn, [failure] * len(units))
                    return None
                i = j
            else:
                outcome = self._run_unit(conn, units[i], wakeups, savepoint=savepoints)
                if not savepoints and isinstance(outcome, StoreError):
                    if len(units) == 1:
                        # Alone in its transaction (the common case at light load, e.g.
                        # an attempt's steps): the ROLLBACK is its undo.
                        return _rolled_back(conn, [outcome])
                    return None
                outcomes[i] = outcome
                i += 1
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            return [_commit_unknown(u, exc) for u in units], {}
        return outcomes, wakeups

    def _run_appends(
        self,
        conn: sqlite3.Connection,
        units: list[Unit],
        start: int,
        stop: int,
        outcomes: list[Any],
        wakeups: dict[str, int],
        savepoint: bool,
    ) -> StoreError | None:
        """Run units[start:stop] (one append each) as one set-based run.

        If the run fails as a whole: with ``savepoint``, its units get the error and the
        rest of the batch goes on; without, the error is returned for the caller to roll
        the transaction back.
        """
        items = []
        for unit in units[start:stop]:
            op = unit.ops[0]
            assert isinstance(op, Append)
            items.append((op.session_id, op.actions))
        fx = Effects()
        if savepoint:
            conn.execute("SAVEPOINT appends")
        try:
            results = drive(conn, _DIALECT.append(items, fx))
        except Exception as exc:  # a store error, or a bug: the run fails as a whole
            error = unit_failure(exc, "sqlite")
            if not savepoint:
                return error
            conn.execute("ROLLBACK TO appends")
            conn.execute("RELEASE appends")
            outcomes[start:stop] = [error] * (stop - start)
            return None
        if savepoint:
            conn.execute("RELEASE appends")
        # Per-item failures were detected before any write, so they need no rollback.
        outcomes[start:stop] = [r if isinstance(r, StoreError) else [r] for r in results]
        _merge(wakeups, fx.wakeups)
        return None

    def _run_unit(
        self,
        conn: sqlite3.Connection,
        unit: Unit,
        wakeups: dict[str, int],
        *,
        savepoint: bool = True,
    ) -> Any:
        fx = Effects()
        if savepoint:
            conn.execute("SAVEPOINT unit")
        try:
            results = drive(conn, unit_program(_DIALECT, unit.fence, unit.ops, fx))
        except Exception as exc:  # a store error, or a bug: this unit fails, alone
            if savepoint:
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
            return unit_failure(exc, "sqlite")
        if savepoint:
            conn.execute("RELEASE unit")
        _merge(wakeups, fx.wakeups)
        return results

    async def check_writable(self) -> None:
        timeout = self.check_writable_timeout
        if self._closed:
            raise Unavailable("the store is closed")
        if self._writer_error is not None or not self._writer.is_alive():
            raise Unavailable(self._writer_error or "the sqlite writer is not running")
        try:
            # An empty unit: the writer's BEGIN IMMEDIATE (the write lock) and COMMIT,
            # behind whatever is queued, with no page written.
            await asyncio.wait_for(self._commit(Unit(None, ())), timeout)
        except TimeoutError as exc:
            raise Unavailable(
                f"the sqlite writer did not start and finish a transaction in {timeout} s"
            ) from exc
        except Unavailable:
            raise
        except StoreError as exc:
            raise Unavailable(f"sqlite: {exc}") from exc

    def _settle(self, live: list[Pending], outcomes: list[Any], wakeups: dict[str, int]) -> None:
        settle(live, outcomes)
        if wakeups:
            self._hub.publish(wakeups)

    def _checkpointer_main(self) -> None:
        """Copy committed WAL frames into the database off the writer's path.

        The writer's own automatic checkpoint (every _WAL_AUTOCHECKPOINT_PAGES) ran inside
        a COMMIT: everything queued behind it waited 30-130 ms while thousands of frames
        were copied and the database fsynced. A PASSIVE checkpoint from this connection
        runs beside the writer (it takes no lock a writer or reader needs), so by the time
        the writer's threshold comes round there is little left for it to copy; it still
        does that last bit itself, which lets the WAL restart from its start instead of
        growing. Best effort: a failed or busy checkpoint is just retried next tick.
        """
        try:
            conn = connect(self.path, readonly=True)
        except sqlite3.Error:
            return
        try:
            while not self._checkpoints.wait(_CHECKPOINT_INTERVAL_S):
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    # -- reads -----------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.path, readonly=True)
            self._reader_conns.append(conn)
        return conn

    async def _read(self, program: Program[T]) -> T:
        """On the event loop's own thread: a point read takes ~20 µs there, and handing it
        to a reader thread cost ~70-200 µs of this thread's CPU (submit, wake-up, result
        callback) besides. A WAL reader never waits for the writer. The `sleep(0)` keeps
        every read a scheduling point, as it was: a loop of reads still lets others run."""
        if self._closed:
            raise StoreError("the store is closed")
        await asyncio.sleep(0)
        conn = self._inline
        if conn is None:
            conn = self._inline = connect(self.path, readonly=True)
            self._reader_conns.append(conn)
        return drive(conn, program)

    async def _scan(self, program: Program[T]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        return await self._loop.run_in_executor(
            self._readers, lambda: drive(self._reader(), program)
        )

    def watch(self) -> Watcher:
        return self._hub.subscribe()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._flush()  # units already submitted are committed before the writer stops
        with self._cond:
            self._stopping = True
            self._cond.notify()
        await asyncio.to_thread(self._writer.join)
        self._checkpoints.set()
        await asyncio.to_thread(self._checkpointer.join)
        await asyncio.to_thread(self._readers.shutdown, wait=True)
        for conn in self._reader_conns:
            conn.close()
        self._hub.close()
        self._rights.close()
        await self._blobs.close()


def _merge(into: dict[str, int], wakeups: dict[str, int]) -> None:
    for session_id, seq in wakeups.items():
        if seq > into.get(session_id, 0):
            into[session_id] = seq


def _abort(conn: sqlite3.Connection) -> None:
    """Roll back whatever transaction is open, so the next batch starts clean."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _rolled_back(conn: sqlite3.Connection, outcomes: list[Any]) -> tuple[list[Any], dict[str, int]]:
    """End a batch whose every unit failed: nothing of it may be committed."""
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        return [Unavailable(f"sqlite: {exc}")] * len(outcomes), {}
    return outcomes, {}


def _commit_unknown(unit: Unit, exc: BaseException) -> CommitUnknown:
    execution_id, epoch = (unit.fence[0], unit.fence[1]) if unit.fence else ("", -1)
    error = CommitUnknown(f"sqlite COMMIT failed: {exc}", execution_id, epoch)
    error.__cause__ = exc
    return error
