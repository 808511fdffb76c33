"""kill -9 of a supervisor between a file write and its commit; the execution resumes on a
second supervisor process with a different workspace root (another machine), on the same
PostgreSQL store whose blobs are in the database (issue 17)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opennua.store import Store, Won, open_store
from tests._support.polling import until
from tests._support.supervisor import EID, SID, accept, action, session_state
from tests.supervisor._machine import NOTES

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def machine(url: str, data: Path, supervisor_id: str) -> Iterator[subprocess.Popen[bytes]]:
    data.mkdir(parents=True, exist_ok=True)
    with open(data / "supervisor.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.supervisor._machine", url, str(data), supervisor_id],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def _answer(store: Store, request_id: str, option_id: str) -> None:
    answer = action(
        "input_request.resolved",
        {
            "request_id": request_id,
            "outcome": "selected",
            "option_id": option_id,
            "answered_by": {"client_id": "cli_t", "principal_id": "prn_o"},
        },
        f"answer/{request_id}",
    )
    async with store.transaction() as tx:
        resolving = tx.resolve_input(
            request_id,
            {"outcome": "selected", "option_id": option_id},
            "prn_o",
            "cli_t",
            time.time(),
            actions=[answer],
        )
    won = resolving.value
    assert isinstance(won, Won)


async def test_a_resumed_execution_finds_its_committed_files_on_another_machine(
    pg_url: str, tmp_path: Path
) -> None:
    a_ws = tmp_path / "a" / "workspaces" / SID
    b_ws = tmp_path / "b" / "workspaces" / SID
    async with await open_store(pg_url) as store:
        await accept(store, time.time())
        with machine(pg_url, tmp_path / "a", "sup_a") as a:
            (approval,) = await until(lambda: store.list_input_requests(SID, status="open"))
            await _answer(store, approval.request_id, "allow_once")

            async def draft_written() -> bool:
                return (a_ws / "draft.md").exists()

            await until(draft_written)  # the command wrote it and now sleeps: no commit yet
            a.send_signal(signal.SIGKILL)
        assert (a_ws / "notes.md").read_text() == NOTES

        with machine(pg_url, tmp_path / "b", "sup_b"):
            # The command may or may not have run: machine b asks before running it again.
            (confirm,) = await until(lambda: store.list_input_requests(SID, status="open"))
            assert confirm.request_id != approval.request_id
            await _answer(store, confirm.request_id, "skip")

            async def ended() -> bool:
                return (await store.get_execution(EID)).status in ("completed", "failed")

            await until(ended)
        assert (await store.get_execution(EID)).status == "completed"
        state = await session_state(store)

    turn = state["turns"][0]
    assert turn["stop_reason"] == "end_turn", turn["error"]
    # The committed file is on machine b; the uncommitted one died with machine a.
    assert (b_ws / "notes.md").read_text() == NOTES
    assert not (b_ws / "draft.md").exists()
    (shell,) = [c for c in turn["tool_calls"].values() if c["name"] == "shell"]
    (restore,) = [r for r in turn["workspace_restores"].values() if r["lost_tool_call_ids"]]
    assert restore["lost_tool_call_ids"] == [shell["tool_call_id"]]
    assert restore["files"] == 1 and restore["manifest"] == turn["workspace"]["manifest"]
    assert {"kind": "workspace_restore", "id": restore["id"]} in turn["timeline"]
    # The command is never run again (skipped when asked), and the turn went on.
    assert shell["status"] == "failed" and shell["error"]["code"] == "skipped"
    assert state["anomalies"] == []
