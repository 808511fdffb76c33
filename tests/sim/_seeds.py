"""The seeded worlds, split into `CHUNKS` test files so they run in parallel.

CI runs pytest under xdist with `--dist loadfile`: every test of a file goes to one
worker. One test over 1,000 seeds kept one worker busy for minutes while the others
idled; `test_seeds_<k>.py` runs the seeds ≡ k (mod `CHUNKS`), and the workers share them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ._run import FAULTS, run_seed

CHUNKS = 4
MARKS = [pytest.mark.sim, pytest.mark.timeout(600)]


def chunk(config: pytest.Config, k: int) -> list[int]:
    """Chunk `k`'s seeds: those of `--sim-seeds` ≡ k (mod CHUNKS), or `--sim-seed N`
    alone when it falls in this chunk."""
    one: int | None = config.getoption("--sim-seed")
    if one is not None:
        return [one] if one % CHUNKS == k else []
    return list(range(k, config.getoption("--sim-seeds"), CHUNKS))


def keeps_every_invariant(config: pytest.Config, k: int, data_dir: Path) -> None:
    """Every world of chunk `k` keeps every invariant, and (over 100 seeds or more) every
    fault fired in at least 1 % of them: a fault that never fires proves nothing."""
    seeds = chunk(config, k)
    if not seeds:
        pytest.skip(f"--sim-seed {config.getoption('--sim-seed')} runs in another chunk")
    failures: list[str] = []
    seeds_with: Counter[str] = Counter()
    for seed in seeds:
        result = run_seed(seed, data_dir, verbose=len(seeds) == 1)
        seeds_with.update(kind for kind in FAULTS if result.fired.get(kind))
        if result.problems:
            failures.append(
                f"seed {seed}: {'; '.join(result.problems[:3])} "
                f"(replay: pytest tests/sim --sim-seed {seed})"
            )
    assert not failures, "\n".join(failures[:20])
    if len(seeds) >= 100:
        rare = {k: seeds_with[k] for k in FAULTS if seeds_with[k] < len(seeds) / 100}
        assert not rare, f"faults that fired in < 1 % of {len(seeds)} seeds: {rare}"
