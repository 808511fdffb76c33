"""The long test (docs/architecture.md §10), with real processes on SQLite and on PostgreSQL.

`nua serve` on a fresh data directory → `nua run --detach` of the demo task → that CLI
has exited → a Python client observes the task continuing → `kill -9` of the server
before the approval → restart → the same input request is still the only one → two
concurrent `nua answer` processes: one wins, the other gets the conflict (exit 4, naming
the winner) → `kill -9` again while the task runs after the answer (inside the
sub-agent) → restart → a `nua attach --json` started before the answers reconnects by
itself and prints exactly the log's tail → the task completes as a later attempt →
`nua show --json` equals the reducer's replay of `nua history --json`; timeline order is
the order of first appearance in the log; plan, sub-agent with nested items, artifact
(downloaded with `nua artifact get`, sha256 checked), whole-turn usage (= the sum of
`usage.recorded`, the sub-agent's included) and the trace chain are present; every tool
call has exactly one terminal status; no tool side effect happened twice.

Each runs twice: the approval allowed, and rejected (issue 12: the call ends `rejected`,
its side effect, `checks.log`, never happens, and the turn still completes).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from opennua.client import ActionEvent, connect
from opennua.protocol import SessionState, action_from_json, replay, state_to_json
from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(150)]

TERMINAL = {"completed", "failed", "cancelled", "rejected"}
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest) -> str | None:
    if request.param == "sqlite":
        return None  # the embedded default: DATA/nua.db
    url: str = request.getfixturevalue("pg_url")
    return url


def _nua(data: Path, *args: str, client_id: str | None = None) -> subprocess.CompletedProcess[str]:
    """One `nua` process, configured only by its data directory (url and token files)."""
    return subprocess.run(
        [sys.executable, "-m", "opennua.cli", *args],
        env=_env(data, client_id),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _env(data: Path, client_id: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUA_URL", "NUA_TOKEN")}
    env |= {"NUA_DATA": str(data), "COLUMNS": "200"}
    if client_id:
        env["NUA_CLIENT_ID"] = client_id
    return env


def _state(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as client:
        body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()
        return body


async def _observe_until_approval(server: Server, sid: str, exited_at: int) -> SessionState:
    """A Python client attaches after the CLI left and watches the task reach the approval."""
    async with connect(server.url, server.token, client_id="cli_observer") as client:
        session = client.session(sid)
        seen: list[str] = []
        async with session.subscribe(0, replay_gaps=True) as live:
            async for event in live:
                if isinstance(event, ActionEvent):
                    seen.append(event.action.type)
                    if event.action.type == "input_request.opened":
                        assert event.action.seq is not None and event.action.seq > exited_at
                        break
            assert {"tool_call.started", "plan.updated", "file.changed"} <= set(seen)
            return live.state


async def _kill_when_the_sub_agent_starts(server: Server, sid: str) -> None:
    client = connect(server.url, server.token)
    async with client, client.session(sid).subscribe() as live:
        state = await live.wait_for(lambda s: s["turns"][0]["workers"])
        server.kill9()  # the live stream tells us within milliseconds: mid-run
    assert state["turns"][0]["state"] == "running"
    (worker,) = state["turns"][0]["workers"].values()
    assert worker["status"] == "running"


def _expected_timelines(actions: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
    """Each run's items in the order they first appear in the log (root run: "turn")."""
    timelines: dict[str, list[dict[str, str]]] = {"turn": []}
    workers: set[str] = set()
    seen: set[tuple[str, str, str]] = set()
    for action in actions:
        kind, data = action["type"], action["data"]
        run = action["run_id"] if action["run_id"] in workers else "turn"
        ref: tuple[str, str] | None = None
        if kind in ("turn.started", "message.started", "message.added"):
            ref = ("message", data["message_id"])
        elif kind in ("reasoning.delta", "reasoning.completed"):
            ref = ("reasoning", data["message_id"])
        elif kind == "tool_call.started":
            ref = ("tool_call", data["tool_call_id"])
        elif kind == "input_request.opened":
            ref = ("input_request", data["request_id"])
        elif kind == "worker.started":
            ref = ("worker", data["worker_run_id"])
        elif kind == "artifact.published":
            ref = ("artifact", data["artifact_id"])
        elif kind == "file.changed":
            ref = ("file_change", action["id"])
        if ref is not None and (run, *ref) not in seen:
            seen.add((run, *ref))
            timelines.setdefault(run, []).append({"kind": ref[0], "id": ref[1]})
        if kind == "worker.started":
            workers.add(data["worker_run_id"])
            timelines.setdefault(data["worker_run_id"], [])
    return timelines


@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
def test_the_long_test(tmp_path: Path, db: str | None, answer: str) -> None:
    data = tmp_path / "nua"
    data.mkdir()
    server = Server(data, db=db, step_delay="0.4").start()
    try:
        _run_the_long_test(server, data, answer)
    finally:
        server.stop()


def _run_the_long_test(server: Server, data: Path, answer: str) -> None:
    # 1. `nua run --detach`: accepted, ids printed, and that CLI process has exited.
    run = _nua(data, "run", "Write a short report", "--detach", "--json")
    assert run.returncode == 0, run.stderr
    ids = json.loads(run.stdout)
    sid, turn_id, execution_id = ids["session_id"], ids["turn_id"], ids["execution_id"]
    exited_at = _state(server, sid)["seq"]

    # 2. A Python client observes the task continuing without any CLI.
    observed = asyncio.run(_observe_until_approval(server, sid, exited_at))
    (opened,) = observed["open_input_requests"]
    request_id = opened["request_id"]

    # 3. kill -9 before the approval, restart: still exactly one (the same) request.
    server.kill9()
    server.start()
    wait_for(lambda: _state(server, sid)["seq"] >= observed["seq"], timeout=10)
    after_restart = _state(server, sid)["state"]
    assert after_restart["open_input_requests"] == [opened]
    assert list(after_restart["turns"][0]["input_requests"]) == [request_id]

    # A `nua attach --json` watches from here on, through the second kill -9.
    watcher_out, watcher_err = data.parent / "attach.out", data.parent / "attach.err"
    with watcher_out.open("wb") as out, watcher_err.open("wb") as err:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "opennua.cli", "attach", sid, "--json"],
            env=_env(data, "cli_watcher"),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    wait_for(lambda: b"waiting for input" in watcher_err.read_bytes(), timeout=30)

    # 4. Two `nua answer` processes at once: the first writer wins, the other is told who.
    answers = {
        who: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "opennua.cli",
                "answer",
                sid,
                request_id,
                "--option",
                answer,
            ],
            env=_env(data, who),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("cli_alice", "cli_bob")
    }
    outcomes = {who: (p.wait(60), p.communicate()) for who, p in answers.items()}
    codes = sorted(code for code, _ in outcomes.values())
    assert codes == [0, 4], outcomes
    winner = next(who for who, (code, _) in outcomes.items() if code == 0)
    loser = next(who for who, (code, _) in outcomes.items() if code == 4)
    assert f"already answered by {winner}" in outcomes[loser][1][1]

    # 5. kill -9 while the task runs after the answer: as soon as the sub-agent starts.
    asyncio.run(_kill_when_the_sub_agent_starts(server, sid))
    server.start()

    # The watcher lost the server, came back by itself and saw the turn end.
    assert watcher.wait(60) == 0, watcher_err.read_text()
    assert "connection lost" in watcher_err.read_text()
    assert "reconnected" in watcher_err.read_text()
    watched = watcher_out.read_text().splitlines()

    # 6. The task completes, as a later attempt that resumed from its checkpoint.
    final = wait_for(
        lambda: (s := _state(server, sid))["state"]["turns"][0]["state"] == "ended" and s,
        timeout=60,
    )
    state: dict[str, Any] = final["state"]
    (turn,) = state["turns"]
    assert turn["turn_id"] == turn_id and turn["stop_reason"] == "end_turn", turn["error"]
    assert len(turn["attempts"]) >= 3  # first run, after the answer, after the second kill
    assert all(a["resumed_from_checkpoint"] for a in turn["attempts"][1:])
    with server.client() as client:
        execution = client.get(f"/v1/executions/{execution_id}").json()
    assert execution["status"] == "completed" and execution["attempt"] >= 2
    assert [a["attempt"] for a in execution["attempts"]] == list(range(1, execution["attempt"] + 1))
    assert [a["attempt_id"] for a in turn["attempts"]] == [
        a["attempt_id"] for a in execution["attempts"]
    ]

    # 7. `nua show --json` is the reducer's replay of `nua history --json`.
    shown = _nua(data, "show", sid, "--json")
    history = _nua(data, "history", sid, "--json")
    assert shown.returncode == 0 and history.returncode == 0, shown.stderr + history.stderr
    lines = history.stdout.splitlines()
    actions = [json.loads(line) for line in lines]
    assert [a["seq"] for a in actions] == list(range(1, len(actions) + 1))
    replayed = replay(action_from_json(line) for line in lines)
    # What the watcher printed live, across the restart, is the log's tail byte for byte.
    assert watched and watched == lines[-len(watched) :]
    assert json.loads(watched[-1])["type"] == "turn.ended"
    assert shown.stdout == state_to_json(replayed) + "\n"
    assert json.loads(shown.stdout) == state and replayed["anomalies"] == []

    # 8. Timeline order is the order of first appearance in the log, for every run.
    expected = _expected_timelines([a for a in actions if a["turn_id"] == turn_id])
    assert turn["timeline"] == expected.pop("turn")
    assert {run: w["timeline"] for run, w in turn["workers"].items()} == expected

    # 9. Plans: the turn's and the sub-agent's, both finished; a rejected shell command
    # leaves its step pending, as the demo then says (it does not claim the check ran).
    shell_step = "completed" if answer == "allow_once" else "pending"
    assert [e["status"] for e in turn["plan"]] == [
        "completed",
        shell_step,
        "completed",
        "completed",
    ]
    (worker,) = turn["workers"].values()
    assert worker["name"] == "researcher" and worker["status"] == "completed"
    assert [e["status"] for e in worker["plan"]] == ["completed"] * 2
    # The sub-agent hangs under its `task` tool call and holds its own items.
    parent_call = turn["tool_calls"][worker["parent_tool_call_id"]]
    assert (
        parent_call["name"] == "task"
        and {"kind": "worker", "id": worker["worker_run_id"]} in (turn["timeline"])
    )
    nested = [turn["tool_calls"][i["id"]] for i in worker["timeline"] if i["kind"] == "tool_call"]
    assert {c["name"] for c in nested} == {"plan", "read_file"}
    assert all(c["run_id"] == worker["worker_run_id"] for c in nested)

    # 10. The artifact: listed, downloaded with `nua artifact get`, sha256 verified.
    (artifact,) = state["artifacts"].values()
    target = data.parent / "report.md"
    got = _nua(data, "artifact", "get", artifact["artifact_id"], "-o", str(target))
    assert got.returncode == 0, got.stderr
    body = target.read_bytes()
    assert hashlib.sha256(body).hexdigest() == artifact["sha256"] and len(body) == artifact["size"]
    assert body.startswith(b"# Report")

    # 11. Whole-turn usage = the sum of every usage.recorded of the turn, sub-agent included.
    recorded = [a for a in actions if a["type"] == "usage.recorded"]
    assert any(a["run_id"] == worker["worker_run_id"] for a in recorded)
    for field in USAGE_FIELDS:
        assert turn["usage"][field] == sum(a["data"][field] for a in recorded), field
        mine = [a for a in recorded if a["run_id"] == worker["worker_run_id"]]
        assert worker["usage"][field] == sum(a["data"][field] for a in mine), field
    usage = json.loads(_nua(data, "usage", sid, "--json").stdout)
    assert usage["turns"][0]["usage"] == turn["usage"]
    assert usage["turns"][0]["sub_agents"][0]["usage"] == worker["usage"]

    # 12. The trace chain: session → turn → execution → attempts → runs with parents.
    trace = json.loads(_nua(data, "trace", sid, "--json").stdout)
    assert trace["session_id"] == sid
    (traced,) = trace["turns"]
    assert traced["turn_id"] == turn_id and traced["trace_id"] == turn["trace_id"]
    assert traced["execution"]["execution_id"] == execution_id
    epochs = [a["epoch"] for a in traced["execution"]["attempts"]]
    assert len(epochs) == len(turn["attempts"]) and epochs == sorted(set(epochs))
    root, child = traced["runs"]
    assert root["parent_run_id"] is None
    assert child["run_id"] == worker["worker_run_id"] and child["parent_run_id"] == root["run_id"]
    assert child["parent_tool_call_id"] == worker["parent_tool_call_id"]

    # 13. Every tool call has exactly one terminal status.
    started = [a["data"]["tool_call_id"] for a in actions if a["type"] == "tool_call.started"]
    assert len(started) == len(set(started)) == len(turn["tool_calls"])
    terminal = Counter(
        a["data"]["tool_call_id"]
        for a in actions
        if a["type"] == "tool_call.updated" and a["data"]["status"] in TERMINAL
    )
    assert terminal == Counter(started), "each call ends exactly once"
    decided = "completed" if answer == "allow_once" else "rejected"
    statuses = {c["name"]: c["status"] for c in turn["tool_calls"].values()}
    assert statuses.pop("shell") == decided
    assert set(statuses.values()) == {"completed"}
    shown_human = _nua(data, "show", sid).stdout
    assert ("⊗ Run command" in shown_human) == (answer == "reject_once"), shown_human

    # 14. No side effect happened twice: the approved command appends one line per run;
    # a rejected one never ran at all.
    workspace = data / "workspaces" / sid  # the session's, shared by its turns
    if answer == "allow_once":
        assert (workspace / "checks.log").read_text().splitlines() == ["5 lines"]
    else:
        assert not list(data.rglob("checks.log"))
    assert (workspace / "notes.md").read_text().startswith("# Notes")
    changes = [a["data"]["path"] for a in actions if a["type"] == "file.changed"]
    assert changes == ["notes.md"]
    names = Counter(turn["tool_calls"][i]["name"] for i in started)
    assert names["shell"] == 1 and names["write_file"] == 1 and names["publish_artifact"] == 1
    assert len(turn["input_requests"]) == 1
