"""Jittered exponential backoff for reconnects and retransmissions.

Jitter matters because a restarted server is hit by every client that lost it at the same
moment; spreading the retries keeps them from arriving as one burst. The random source is
passed in so tests get reproducible delays.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from opennua._common import RetryPolicy


@dataclass
class Backoff:
    """Delay before retry `n` (0-based): uniform in [d/2, d], d = min(cap, base * 2**n)."""

    base: float = 0.2
    cap: float = 5.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        return RetryPolicy(self.base, self.cap).delay(attempt + 1, self.rng.random())
