"""The store contract: every role (`_roles*`) in one object, on one backend's commit and
read paths. Each public method is one unit of work (or one read) so that every write,
whichever method made it, goes through the same commit path."""

from __future__ import annotations

import abc
from typing import Any, TypeVar

from ._blobs import BlobStore
from ._roles import ExecutionJournal, FileStore, InputStore, LogStore, RegistryStore
from ._roles_access import AuthStore, GatewayStore, SealedSecretStore
from ._roles_automation import AutomationStore, SubscriptionStore
from ._sql import Op, Program
from ._unit import Unit
from ._watch import Watcher, WatchHub

T = TypeVar("T")


class Store(
    LogStore,
    ExecutionJournal,
    InputStore,
    FileStore,
    RegistryStore,
    AuthStore,
    AutomationStore,
    SubscriptionStore,
    SealedSecretStore,
    GatewayStore,
    abc.ABC,
):
    """Every durable fact of opennua, every role in one object. Use as ``async with await
    open_store(...) as store`` where the process is put together, and hand each part the
    role it needs (`_roles`)."""

    #: How long :meth:`check_writable` waits for the write path before it says no.
    check_writable_timeout: float = 5.0

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs
        #: In-process fan-out of `watch_rights` (PostgreSQL feeds it from NOTIFY).
        self._rights = WatchHub()

    # -- backend hooks ---------------------------------------------------------------

    @abc.abstractmethod
    async def _commit(self, unit: Unit) -> list[Any]:
        """Commit one unit; return its ops' results, or raise the error that voided it."""

    @abc.abstractmethod
    async def _read(self, program: Program[T]) -> T:
        """Run a read program on a reader connection."""

    async def _scan(self, program: Program[T]) -> T:
        """Run a read that may visit many rows (an aggregate, a filtered listing): where a
        backend runs point reads inline, this one goes where it cannot hold others up."""
        return await self._read(program)

    @abc.abstractmethod
    def watch(self) -> Watcher:
        """Wake-ups ``(session_id, seq)`` for appends committed after this call.

        A wake-up only: re-read from your last seq. Close it (``async with``) when done.
        """

    def watch_rights(self) -> Watcher:
        """Wake-ups ``(principal_id, 1)`` after a committed change that may have taken
        rights away from that principal: a token revoked (everywhere or for a workspace),
        a membership removed or changed, a principal disabled, a server admin demoted. On
        PostgreSQL from every process on the database (NOTIFY), else from this one.

        A wake-up only: re-read what the principal may do. Close it when done.
        """
        return self._rights.subscribe()

    def _rights_changed(self, *principal_ids: str) -> None:
        """After such a change committed: wake this process's `watch_rights` watchers.
        (PostgreSQL's ops NOTIFY in their transaction instead, which reaches all.)"""
        self._rights.publish(dict.fromkeys(principal_ids, 1))

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish queued writes, then release connections and threads. Idempotent."""

    @abc.abstractmethod
    async def check_writable(self) -> None:
        """Prove that a write transaction can start and finish now, or raise
        :class:`Unavailable` within about :attr:`check_writable_timeout` seconds.

        For readiness probes: cheap enough to call every few seconds, and it stores
        nothing (SQLite: an empty unit through the writer thread, whose ``BEGIN
        IMMEDIATE``/``COMMIT`` writes no page; PostgreSQL: a short read-write
        transaction on a pooled connection).
        """

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    async def _one(self, op: Op) -> Any:
        (result,) = await self._commit(Unit(None, (op,)))
        return result
