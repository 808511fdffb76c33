"""Jittered exponential backoff for reconnects and retransmissions.

Jitter matters because a restarted server is hit by every client that lost it at the same
moment; spreading the retries keeps them from arriving as one burst. The random source is
passed in so tests get reproducible delays.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delay before retry `n` (0-based): uniform in [d/2, d], d = min(cap, base * 2**n)."""

    base: float = 0.2
    cap: float = 5.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        ceiling = min(self.cap, self.base * (2 ** min(attempt, 30)))
        return float(ceiling / 2 + self.rng.uniform(0, ceiling / 2))
