"""The deterministic simulation as a soak: many more seeds than CI runs.

    python benchmarks/sim.py [--seeds 100000] [--start 0] [--workers 2]

Runs the worlds of tests/sim (hosts, supervisors, racing clients, seeded crashes, pauses,
lost commit outcomes, duplicated and reordered intents, stalled subscribers, expiring
deadlines) for seeds start..start+seeds-1 across `workers` processes, checks every
invariant after each, and prints: seeds/s, virtual hours simulated, how many seeds each
fault fired in, and every failing seed (replay one with `pytest tests/sim --sim-seed N`).
Prints figures only; exits 1 if any seed failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim._run import FAULTS, run_seed


def _chunk(args: tuple[int, int]) -> tuple[Counter[str], list[str], float, int]:
    start, count = args
    seeds_with: Counter[str] = Counter()
    failures: list[str] = []
    virtual = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(start, start + count):
            result = run_seed(seed, Path(tmp))
            seeds_with.update(kind for kind in FAULTS if result.fired.get(kind))
            seeds_with.update(k for k in result.fired if k not in FAULTS and result.fired[k])
            virtual += result.virtual_seconds
            if result.problems:
                failures.append(f"seed {seed}: {'; '.join(result.problems[:3])}")
    return seeds_with, failures, virtual, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100_000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    size = 200
    chunks = [
        (s, min(size, args.start + args.seeds - s))
        for s in range(args.start, args.start + args.seeds, size)
    ]
    began = time.perf_counter()
    seeds_with: Counter[str] = Counter()
    failures: list[str] = []
    virtual = 0.0
    done = 0
    with ProcessPoolExecutor(args.workers) as pool:
        for fired, failed, seconds, count in pool.map(_chunk, chunks):
            seeds_with.update(fired)
            failures += failed
            virtual += seconds
            done += count
            elapsed = time.perf_counter() - began
            print(f"  {done:>7} seeds  {done / elapsed:6.1f} seeds/s  {len(failures)} failed")
    elapsed = time.perf_counter() - began
    print(
        f"seeds: {done} in {elapsed:.0f} s ({done / elapsed:.1f} seeds/s, {args.workers} workers)"
    )
    print(f"virtual time simulated: {virtual / 3600:.1f} h")
    for kind in sorted(seeds_with):
        share = 100 * seeds_with[kind] / done
        print(f"  {kind:20} fired in {seeds_with[kind]:>7} seeds ({share:.1f} %)")
    print(f"failing seeds: {len(failures)}")
    for line in failures[:50]:
        print(f"  {line}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
