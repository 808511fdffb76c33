"""The deterministic simulation (issue 20): many seeded worlds, each checked whole.

`pytest tests/sim` runs `--sim-seeds` seeds (1,000 by default) split over the
`test_seeds_<k>.py` files, which xdist workers run in parallel; `pytest tests/sim
--sim-seed N` replays seed N exactly and prints what happened. A failure names its seed.
`benchmarks/sim.py --seeds 100000` is the soak. This file: a seed replays exactly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ._run import fingerprint

pytestmark = [pytest.mark.sim, pytest.mark.timeout(600)]


def test_a_seed_replays_exactly(tmp_path: Path) -> None:
    assert fingerprint(7, tmp_path) == fingerprint(7, tmp_path)
    assert fingerprint(7, tmp_path) != fingerprint(8, tmp_path)


def test_a_seed_replays_exactly_in_another_process(tmp_path: Path) -> None:
    # `--sim-seed N` replays a failure in a new process: nothing the world does may hang
    # on what differs between processes (object addresses, string hashes). These seeds
    # each took another path in another process while a kill cancelled a process's
    # tasks in address order.
    seeds = [13, 21, 88, 141]
    code = (
        "import sys; from pathlib import Path; from tests.sim._run import fingerprint; "
        f"print(' '.join(fingerprint(s, Path(sys.argv[1])) for s in {seeds!r}))"
    )
    root = Path(__file__).resolve().parents[2]
    there = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "there")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.split()
    assert there == [fingerprint(seed, tmp_path / "here") for seed in seeds]
