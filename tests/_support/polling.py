"""Waiting for a condition, the one way: poll, and fail saying what never happened."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T], timeout: float = 60, what: str = "", *, interval: float = 0.1
) -> T:
    """The first truthy value of `predicate()`, polled every `interval` (blocking)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"{what or 'condition'}: not met within {timeout} s")


async def until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 20,
    what: str = "",
    *,
    interval: float = 0.05,
) -> T:
    """The first truthy value of `predicate()` (a plain or an async callable), polled every
    `interval` without blocking the loop."""
    deadline = time.monotonic() + timeout
    while True:
        result: Any = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what or 'condition'}: not met within {timeout} s")
        await asyncio.sleep(interval)
