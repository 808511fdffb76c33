"""One retry policy (temporalio's `RetryPolicy` is the model): exponential backoff with
equal jitter, capped, and an optional limit on tries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Before retry `n` (1 for the first) wait `d/2 + d/2 * u`, `d = min(cap, base * 2**(n-1))`
    and `u` uniform in [0, 1): half the step fixed, half random, so clients that failed
    together spread out but never retry at once. `max_attempts` 0: never give up."""

    base: float = 1.0
    cap: float = 8.0
    max_attempts: int = 0

    def delay(self, retry: int, unit_random: float) -> float:
        """Seconds before retry `retry`; `unit_random` in [0, 1) (passed in: tests pin it)."""
        step = min(self.cap, self.base * 2.0 ** min(max(0, retry - 1), 64))
        return step / 2 + step / 2 * unit_random

    def gives_up(self, attempts: int, permanent: bool = False) -> bool:
        """Whether to stop after `attempts` tries (a `permanent` failure: at once)."""
        return permanent or (self.max_attempts > 0 and attempts >= self.max_attempts)
