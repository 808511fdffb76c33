"""A deterministic event loop: virtual time, a seeded scheduler, no threads.

Time: `loop.time()` is virtual and only moves when nothing is ready to run; it then jumps
to the next timer (a sleep of an hour costs nothing). Scheduling: before each iteration the
ready callbacks are shuffled with the seed's RNG, so every seed is one interleaving of the
tasks of hosts, supervisors and clients, and the same seed is the same interleaving.
Threads: `run_in_executor` (and so `asyncio.to_thread`) runs the function inline.

`looptime` (PyPI) fast-forwards time the same way, but it does not reorder callbacks or
inline executors, and it is driven per test by its plugin; the simulation needs a fresh
loop per seed, hundreds per test, so these ~60 lines are ours (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import random
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


class Deadlock(RuntimeError):
    """Every task waits and no timer is due: nothing can ever happen again."""


class Livelock(RuntimeError):
    """Tasks kept running without virtual time ever moving on: a busy loop."""


#: Loop iterations at one virtual instant before that counts as a busy loop.
SPIN_LIMIT = 100_000


class _VirtualSelector(selectors.DefaultSelector):
    """Polls the real file descriptors (the loop's self-pipe) without blocking; a wait
    for `timeout` seconds becomes a jump of the virtual clock."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: SimLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise Deadlock("no task can run and no timer is pending")
        assert self.loop is not None
        self.loop.now += timeout
        return []


class SimLoop(asyncio.SelectorEventLoop):
    def __init__(self, seed: int, *, start: float = 0.0) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = start
        self.rng = random.Random(seed)
        self._clock_resolution = 1e-9
        self._spins = 0
        self._spun_at = start

    def time(self) -> float:
        return self.now

    def _run_once(self) -> None:
        ready: Any = self._ready  # type: ignore[attr-defined]
        if self.now != self._spun_at:
            self._spun_at, self._spins = self.now, 0
        self._spins += 1
        if self._spins > SPIN_LIMIT:
            handles = ", ".join(repr(h) for h in list(ready)[:5])
            raise Livelock(f"{SPIN_LIMIT} iterations at t={self.now:.3f}: {handles}")
        if len(ready) > 1:
            items = list(ready)
            self.rng.shuffle(items)
            ready.clear()
            ready.extend(items)
        super()._run_once()  # type: ignore[misc]

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def run(seed: int, main: Callable[[], Coroutine[Any, Any, T]], *, start: float = 0.0) -> T:
    """Run `main()` to completion on a fresh SimLoop for `seed`."""
    loop = SimLoop(seed, start=start)
    try:
        return loop.run_until_complete(main())
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
