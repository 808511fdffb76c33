"""`kill -9` of a process group-committing many steps on SQLite, at random moments: the next
attempt resumes from what landed, every call ends completed exactly once in the log, a
side-effecting tool never ran twice unless a person said "run it again", and the log has
no gap or duplicate."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from opennua.runtime import Answer, Completed, Suspended
from opennua.store import open_store
from tests.e2e._steps_child import CALLS, SESSION, run_once

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _kill_mid_run(db: Path, work: Path, kill_after: int) -> None:
    """Run the first attempt in a child process; SIGKILL it once `kill_after` tools ran."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e._steps_child", str(db), str(work)], cwd=ROOT
    )
    deadline = time.monotonic() + 60
    while len(_lines(work / "emits.log")) + len(_lines(work / "charges.log")) < kill_after:
        assert child.poll() is None, "the child ended before it was killed"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


async def _finish(db: Path, work: Path) -> None:
    retried: set[str] = set()
    answers: dict[str, Answer] = {}
    now = time.time() + 120  # past the dead attempt's lease
    for _ in range(10):
        outcome = await run_once(db, work, now, answers)
        if isinstance(outcome, Completed):
            break
        assert isinstance(outcome, Suspended), outcome
        # The only question a crash may ask: a side effect interrupted mid-call. Run it again.
        answers = {request_id: Answer(option_id="retry") for request_id in outcome.request_ids}
        now += 120
    assert isinstance(outcome, Completed) and outcome.output == "done"

    async with await open_store(f"sqlite:///{db}") as store:
        log = await store.read(SESSION, limit=100_000)
    assert [a["seq"] for a in log] == list(range(1, len(log) + 1))
    assert len({a["id"] for a in log}) == len(log)
    completed = Counter(
        a["data"]["tool_call_id"]
        for a in log
        if a["type"] == "tool_call.updated" and a["data"]["status"] == "completed"
    )
    assert len(completed) == CALLS and set(completed.values()) == {1}
    for a in log:
        if a["type"] == "input_request.opened":
            assert a["data"]["reason"] == "confirmation"
            retried.add(a["data"]["tool_call_id"])
    charges = Counter(_lines(work / "charges.log"))
    assert len(charges) == CALLS // 3
    for call_id, runs in charges.items():
        assert runs == 1 or (runs == 2 and call_id in retried), (call_id, runs)
    assert set(_lines(work / "emits.log")) <= set(completed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill9_mid_group_commit_loses_nothing_and_repeats_no_side_effect(
    tmp_path: Path, seed: int
) -> None:
    db, work = tmp_path / "nua.db", tmp_path / "work"
    work.mkdir()
    _kill_mid_run(db, work, random.Random(seed).randrange(10, CALLS - 10))
    asyncio.run(_finish(db, work))
