"""Short variants of the benchmarks whose full runs are soaks (the long runs are the
scripts with their goal counts): each script runs end to end and its checks hold on a few
cycles, so it cannot rot unnoticed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a short variant may take: generous, for a loaded machine; the test's own
#: timeout is longer, so a run that overstays is reported with its output.
LIMIT = 300


def _bench(*args: str) -> str:
    """Run a benchmark script in its own process group; stdout on success. On a timeout
    the whole group is killed: the servers it started must not outlive it."""
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{args[0]} did not finish in {LIMIT} s:\n{out}") from None
    assert proc.returncode == 0, out
    return out


@pytest.mark.timeout(LIMIT + 30)
def test_the_soak_runs_and_every_count_holds_on_a_few_cycles() -> None:
    out = _bench(
        "benchmarks/soak.py", "--kills", "2", "--races", "10", "--accepts", "30",
        "--backends", "sqlite",
    )  # fmt: skip
    assert "sqlite: races with exactly one winner: 10" in out, out
    assert "sqlite: duplicates: 0" in out and "sqlite: mismatches refused (422): 10" in out, out
    assert "0 lost, seqs gapless" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_scale_benchmark_runs_a_level_and_parks_sessions() -> None:
    out = _bench(
        "benchmarks/scale.py", "--seconds", "2", "--warmup", "1", "--levels", "1,10",
        "--backends", "sqlite", "--parked", "3", "--no-langgraph",
    )  # fmt: skip
    for n in (1, 10):  # a level that counted nothing prints 0.0 steps/s
        assert re.search(rf"opennua nua serve +{n} sessions +[1-9][0-9.]* steps/s", out), out
    assert "parked on approval: 3 of 3 sessions" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_gateway_benchmark_runs_on_a_few_calls() -> None:
    out = _bench("benchmarks/gateway.py", "--calls", "20", "--warmup", "5", "--repeat", "1")
    assert "direct " in out and "gateway " in out and "added " in out, out
