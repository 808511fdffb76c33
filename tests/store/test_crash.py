"""Crash test with real processes: SIGKILL at random moments loses nothing acknowledged."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from opennua.store import open_store

CHILD = Path(__file__).with_name("crash_child.py")
CYCLES = 20


def _run_and_kill(url: str, out: Path, rng: random.Random, cycle: int) -> None:
    with (
        out.open("ab") as sink,
        subprocess.Popen([sys.executable, str(CHILD), url, "ses_crash"], stdout=sink) as proc,
    ):
        if cycle % 5 == 4:
            # Sometimes kill during start-up: opening, migrating, creating the session.
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            start, size = time.monotonic(), out.stat().st_size
            while out.stat().st_size == size:  # wait until it is really appending
                assert proc.poll() is None, "child died on its own"
                assert time.monotonic() - start < 30, "child never appended"
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.25))
        proc.kill()  # SIGKILL: no cleanup, no flush, no graceful close
    # The kill can cut the child's last write short (Linux checks for fatal signals
    # between pages). Mark such a torn line so it cannot merge with the next child's.
    with out.open("rb+") as f:
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b" torn\n")


@pytest.mark.on_disk
@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_sigkill_never_loses_an_acknowledged_append(store_url: str, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    out = tmp_path / "acknowledged.txt"
    out.touch()
    for cycle in range(CYCLES):
        await asyncio.to_thread(_run_and_kill, store_url, out, rng, cycle)

    acknowledged: dict[int, str] = {}
    lines = out.read_text().splitlines()
    for line in lines:
        if line.endswith(" torn"):
            continue  # printed after its commit, but cut by the kill: proves nothing
        seq, action_id = line.split(" ")
        assert acknowledged.setdefault(int(seq), action_id) == action_id, f"seed={seed}"
    assert len(acknowledged) > CYCLES, f"too few appends to mean anything (seed={seed})"

    async with await open_store(store_url) as store:
        log = await store.read("ses_crash", limit=1_000_000)
        session = await store.get_session("ses_crash")
    stored = {a["seq"]: a["id"] for a in log}
    assert [a["seq"] for a in log] == list(range(1, len(log) + 1)), f"gap (seed={seed})"
    assert session.last_seq == len(log)
    missing = {s: i for s, i in acknowledged.items() if stored.get(s) != i}
    assert not missing, f"acknowledged but lost: {list(missing.items())[:5]} (seed={seed})"

    if store_url.startswith("sqlite:///"):
        path = store_url.removeprefix("sqlite://")
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
