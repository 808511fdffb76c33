"""`nua serve --max-executions N`: a process runs at most N executions at once; the rest
wait queued, and a turn parked for an answer gives its slot to the next."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from opennua.cli import app
from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]


def _turn_state(client: httpx.Client, sid: str) -> str | None:
    turns = client.get(f"/v1/sessions/{sid}").json()["state"]["turns"]
    return turns[-1]["state"] if turns else None


def _start_turn(client: httpx.Client) -> str:
    sid: str = client.post("/v1/sessions", json={"title": "t", "client_id": "cli_t"}).json()[
        "session_id"
    ]
    accepted = client.post(
        f"/v1/sessions/{sid}/messages",
        json={"client_id": "cli_t", "content": [{"type": "text", "text": "report"}]},
    )
    assert accepted.status_code == 202, accepted.text
    return sid


def test_one_execution_at_a_time_and_a_parked_turn_frees_its_slot(tmp_path: Path) -> None:
    # Demo steps of a second each: the first turn runs for seconds before it asks for
    # its approval, long enough to see the second wait.
    server = Server(tmp_path, step_delay="1", args=["--max-executions", "1"]).start()
    try:
        with server.client() as client:
            first = _start_turn(client)
            wait_for(lambda: _turn_state(client, first) == "running", timeout=30)
            second = _start_turn(client)
            seen_waiting = 0
            while (a := _turn_state(client, first)) == "running":
                b = _turn_state(client, second)
                assert b == "queued", (a, b)
                seen_waiting += 1
                time.sleep(0.2)
            assert seen_waiting >= 1, seen_waiting
            assert a == "requires_action"
            # Parked for its approval, the first holds no slot: the second runs.
            wait_for(
                lambda: _turn_state(client, second) in ("running", "requires_action"), timeout=30
            )
    finally:
        server.stop()


def test_nua_serve_refuses_fewer_than_one_execution() -> None:
    result = CliRunner().invoke(app, ["serve", "--max-executions", "0"])
    assert result.exit_code == 2
    assert "--max-executions must be at least 1" in result.output
    assert "--max-executions" in CliRunner().invoke(app, ["serve", "--help"]).output
