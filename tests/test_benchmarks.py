"""The soak's short variant (its long run is `benchmarks/soak.py` with the goal counts): the
script runs end to end and its checks hold on a few cycles, so it cannot rot unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_soak_runs_and_every_count_holds_on_a_few_cycles() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--kills", "2", "--races", "10",
         "--accepts", "30", "--backends", "sqlite"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "sqlite: races with exactly one winner: 10" in out, out
    assert "sqlite: duplicates: 0" in out and "sqlite: mismatches refused (422): 10" in out, out
    assert "0 lost, seqs gapless" in out, out


def test_the_scale_benchmark_runs_a_level_and_parks_sessions() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/scale.py", "--seconds", "2", "--levels", "1",
         "--backends", "sqlite", "--parked", "3", "--no-langgraph"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "opennua nua serve              1 sessions" in out, out
    assert "parked on approval: 3 of 3 sessions" in out, out


def test_the_gateway_benchmark_runs_on_a_few_calls() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/gateway.py", "--calls", "20", "--warmup", "5",
         "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "direct " in done.stdout and "gateway " in done.stdout and "added " in done.stdout
