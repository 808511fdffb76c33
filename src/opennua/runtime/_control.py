"""How the loop's parts leave a step early: cancellation, stopping, suspending."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress
from typing import TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """The execution was cancelled; every open run ends `cancelled`."""


class Stop(Exception):
    """The execution stops early with `reason` (and, for a failure, an error `code`)."""

    def __init__(self, reason: str, code: str | None = None, message: str = "") -> None:
        super().__init__(message)
        self.reason, self.code, self.message = reason, code, message


class Suspend(Exception):
    """A run waits for a person: the execution suspends until `request_id` is answered."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class CancelScope:
    """The execution's cancel signal, and racing work against it."""

    def __init__(self, event: asyncio.Event | None = None) -> None:
        self.event = event if event is not None else asyncio.Event()

    def check(self) -> None:
        if self.event.is_set():
            raise Cancelled()

    async def race(self, work: Awaitable[T]) -> T:
        """Await `work` unless cancel fires first; then cancel it (a shell tool kills its
        process tree as it unwinds) and raise `Cancelled`."""
        self.check()
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            # The caller itself is cancelled (its attempt lost the lease, or shuts down):
            # the work must not go on behind its back, e.g. a command's process tree.
            task.cancel()
            with suppress(BaseException):
                await task
            raise
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with suppress(BaseException):
            await task
        raise Cancelled()
