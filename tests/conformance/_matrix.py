"""The protocol conformance matrix: the seeds' seven scenarios (rows) × every client
(columns), with real processes. The rows are here; each `test_matrix_*.py` runs them for
its share of the columns (`column_fixture`), so the columns spread over the test workers.
Each scenario is written once against `Driver` (`_drivers.py`); each column is a driver.
Each cell asserts its row's core assertion and takes the Host's own state and history as
the truth. The run writes the matrix to
docs/conformance.md (`conftest.py`), and a ✗ there is a failed test here.

Shared per column: one `nua serve` (the zero-delay scripted demo) and one driver — a
browser, a Synapse with the bridge — for all seven rows, so a cell costs a turn, not a start.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance._drivers import Answered, Driver
from tests.conformance._host import HOST_CLIENT, Loop, column_server, restart

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

#: column id -> (its name in the matrix, the driver, what it needs to run)
COLUMNS: dict[str, tuple[str, str, Callable[[], str | None]]] = {}


def _none() -> str | None:
    return None


def _chromium() -> str | None:
    from tests.browser.conftest import CHROMIUM

    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return None
    return f"no Chromium at {CHROMIUM}"


def _matrix_extra() -> str | None:
    if importlib.util.find_spec("synapse") and importlib.util.find_spec("nio"):
        return None
    return "the `matrix` extra (Synapse, matrix-nio) is not installed"


def _desk() -> str | None:
    if importlib.util.find_spec("feedback_desk"):
        return None
    return "the feedback desk is not installed (pip install -e examples/feedback_desk)"


COLUMNS["web"] = ("web UI", "tests.conformance._web:WebDriver", _chromium)
COLUMNS["cli"] = ("CLI", "tests.conformance._drivers:CliDriver", _none)
COLUMNS["python"] = ("Python client", "tests.conformance._drivers:PythonDriver", _none)
COLUMNS["bridge"] = ("chat bridge", "tests.conformance._chat:ChatDriver", _matrix_extra)
COLUMNS["automation"] = ("automation", "tests.conformance._automation:AutomationDriver", _none)
COLUMNS["agui"] = ("AG-UI", "tests.conformance._agui:AguiDriver", _none)
COLUMNS["acp"] = ("ACP", "tests.conformance._acp:AcpDriver", _none)
COLUMNS["a2a"] = ("A2A", "tests.conformance._a2a:A2ADriver", _none)
COLUMNS["desk"] = ("feedback desk", "tests.conformance._desk:DeskDriver", _desk)

#: What each `test_matrix_*.py` takes: the rows, and the event loop their drivers share.
__all__ = [
    "loop",
    "test_artifact_after_restart",
    "test_disconnect_and_reconnect",
    "test_hitl_first_writer_wins",
    "test_slow_and_concurrent_clients",
    "test_todo_and_sub_agents",
    "test_tools_and_streaming",
    "test_usage_and_trace",
]

#: test function -> its row in the matrix, in the seeds' order
ROWS = {
    "test_tools_and_streaming": "1 tools and streaming: ordered, no duplicates",
    "test_hitl_first_writer_wins": "2 HITL: first writer wins",
    "test_disconnect_and_reconnect": "3 disconnect/reconnect: the agent goes on, client catches up",
    "test_todo_and_sub_agents": "4 TODO and sub-agents: state and links complete",
    "test_artifact_after_restart": "5 artifacts: resolvable after a server restart (sha256)",
    "test_usage_and_trace": "6 usage and trace: sub-agents included, trace id present",
    "test_slow_and_concurrent_clients": "7 slow or concurrent clients: bounded and converged",
}


@pytest.fixture(scope="module")
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


def column_fixture(columns: list[str]) -> Any:
    """The `driver` fixture of a module that runs the rows for `columns`: one server and
    one driver per column, shared by its seven rows."""
    unknown = set(columns) - set(COLUMNS)
    assert not unknown, f"no such column: {unknown}"

    @pytest.fixture(scope="module", params=columns)
    def driver(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, loop: Loop
    ) -> Iterator[Driver]:
        _, target, needs = COLUMNS[request.param]
        missing = needs()
        if missing:
            if os.environ.get("CI"):
                pytest.fail(f"CI is set but {missing}")
            pytest.skip(missing)
        module, name = target.split(":")
        server = column_server(tmp_path_factory.mktemp(request.param))
        try:
            made: Driver = getattr(importlib.import_module(module), name)(server, loop)
            try:
                yield made
            finally:
                made.close()
        finally:
            server.stop()

    return driver


def _assert_log_is_gapless(history: list[dict[str, Any]]) -> None:
    seqs = [a["seq"] for a in history]
    assert seqs == list(range(1, len(history) + 1)), "the Host's log has a gap or a repeat"
    assert len({a["id"] for a in history}) == len(history), "an action id appears twice"


def _assert_received_in_order(
    received: list[dict[str, Any]] | None, history: list[dict[str, Any]]
) -> None:
    """What the client received live is a run of the Host's log: in order, no repeats, no
    holes, the same bytes, and it reaches the end of the first turn it followed."""
    if received is None:
        return  # a client without a stream of its own: its view is compared instead
    seqs = [a["seq"] for a in received]
    assert seqs, "the client received nothing"
    assert len(set(seqs)) == len(seqs), "the client received an action twice"
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "out of order, or an action missed"
    by_seq = {a["seq"]: a for a in history}
    assert [by_seq[s] for s in seqs] == received, "the client received other bytes"
    ended = next(a["seq"] for a in history if a["type"] == "turn.ended" and a["seq"] >= seqs[0])
    assert seqs[-1] >= ended, "the client stopped before its turn ended"


def _turn(state: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = state["turns"][-1]
    return turn


def test_tools_and_streaming(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    host.settle(sid)
    history = host.history(sid)
    _assert_log_is_gapless(history)
    assert any(a["type"] == "message.delta" for a in history), "nothing was streamed"
    view = driver.converged(sid)
    assert len(set(view.items)) == len(view.items), "an item is shown twice"
    turn = _turn(host.state(sid))
    assert turn["stop_reason"] == "end_turn"
    assert len(turn["tool_calls"]) >= 8 and all(
        c["status"] == "completed" for c in turn["tool_calls"].values()
    ), "every tool call ran to completion"
    _assert_received_in_order(driver.received(sid), history)


def _race(driver: Driver, sid: str, rid: str) -> tuple[Answered, httpx.Response]:
    """This client and another (the Host API) answer the same request at once."""
    barrier = threading.Barrier(2)
    theirs: list[httpx.Response] = []

    def other() -> None:
        barrier.wait()
        theirs.append(driver.host.answer(sid, rid, "reject_once"))

    thread = threading.Thread(target=other)
    thread.start()
    barrier.wait()
    mine = driver.answer(sid, rid, "allow_once")
    thread.join(60)
    return mine, theirs[0]


def test_hitl_first_writer_wins(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    rid = host.open_request(sid)
    driver.converged(sid)  # the client shows the request before anyone answers
    mine, theirs = _race(driver, sid, rid)
    resolved = _turn(host.state(sid))["input_requests"][rid]
    winner = resolved["answered_by"]["client_id"]
    assert winner in (driver.client_id, HOST_CLIENT)
    assert mine.won != (theirs.status_code == 200), "exactly one answer wins"
    assert mine.winner == winner, "the client names the Host's winner"
    if mine.won:
        assert resolved["option_id"] == "allow_once"
        assert theirs.status_code == 409
        assert theirs.json()["resolution"]["answered_by"]["client_id"] == winner
    else:
        assert resolved["option_id"] == "reject_once"
    resolutions = [
        a for a in host.history(sid)
        if a["type"] == "input_request.resolved" and a["data"]["request_id"] == rid
    ]  # fmt: skip
    assert len(resolutions) == 1, "one resolution in the log"
    host.settle(sid)
    driver.converged(sid)


def test_disconnect_and_reconnect(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    rid = host.open_request(sid)
    driver.converged(sid)
    left_at = host.snapshot(sid)["seq"]
    driver.disconnect(sid)
    assert host.answer(sid, rid).status_code == 200  # someone else answers meanwhile
    state = host.ended(sid)
    assert _turn(state)["stop_reason"] == "end_turn", "the agent went on without the client"
    assert state["seq"] > left_at + 20, "the turn did its work while the client was away"
    driver.reconnect(sid)
    driver.converged(sid)
    _assert_received_in_order(driver.received(sid), host.history(sid))


def test_todo_and_sub_agents(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    host.settle(sid)
    turn = _turn(host.state(sid))
    assert [e["status"] for e in turn["plan"]] == ["completed"] * 4, "the TODO is complete"
    [worker] = turn["workers"].values()
    parent = turn["tool_calls"][worker["parent_tool_call_id"]]
    assert parent["name"] == "task" and parent["status"] == "completed"
    assert worker["status"] == "completed" and worker["summary"], "the sub-agent reported"
    assert [e["status"] for e in worker["plan"]] == ["completed"] * 2
    assert worker["parent_run_id"] == parent["run_id"], "the sub-agent links to its parent run"
    own = [ref for ref in worker["timeline"] if ref["kind"] == "tool_call"]
    assert own and all(
        turn["tool_calls"][ref["id"]]["run_id"] == worker["worker_run_id"] for ref in own
    ), "the sub-agent's steps are its own run's"
    view = driver.converged(sid)
    if "test_todo_and_sub_agents" in driver.partial:
        return  # a client that shows no sub-agents: it converged on what it does show
    card = f"worker:{worker['worker_run_id']}"
    assert card in view.items or any(worker["summary"] in item for item in view.items), (
        "the client shows the sub-agent"
    )


def test_artifact_after_restart(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    state = host.settle(sid)
    [artifact] = [a for a in state["artifacts"].values() if a["turn_id"] == _turn(state)["turn_id"]]
    with driver.server.client() as http:
        registered = http.get(f"/v1/artifacts/{artifact['artifact_id']}").json()
    assert registered["sha256"] == artifact["sha256"], "the Host registered what it announced"
    restart(driver.server)
    if "test_artifact_after_restart" not in driver.partial:
        data = driver.read_artifact(sid, artifact["artifact_id"])
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"], "other bytes after restart"
        assert len(data) == artifact["size"]
    driver.converged(sid)


def test_usage_and_trace(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    state = host.settle(sid)
    turn = _turn(state)
    recorded = [
        a for a in host.history(sid)
        if a["type"] == "usage.recorded" and a["turn_id"] == turn["turn_id"]
    ]  # fmt: skip
    workers = {w["worker_run_id"] for w in turn["workers"].values()}
    assert any(a["run_id"] in workers for a in recorded), "the sub-agent recorded usage"
    total = (
        sum(a["data"]["input_tokens"] for a in recorded),
        sum(a["data"]["output_tokens"] for a in recorded),
    )
    assert (turn["usage"]["input_tokens"], turn["usage"]["output_tokens"]) == total
    assert re.fullmatch(r"[0-9a-f]{32}", turn["trace_id"] or ""), "the turn has a trace id"
    view = driver.converged(sid)
    if "test_usage_and_trace" in driver.partial:
        return  # a client that shows no usage: it converged on what it does show
    assert view.usage[-1] == total, "the client shows usage with the sub-agent's included"
    if view.trace_ids:
        assert view.trace_ids[-1] == turn["trace_id"], "the client shows the turn's trace id"


def test_slow_and_concurrent_clients(driver: Driver) -> None:
    sid = driver.start_turn()
    host = driver.host
    host.open_request(sid)
    driver.converged(sid)
    with driver.slow(sid):
        # Two more messages at once, from this client and another, while the first waits.
        barrier = threading.Barrier(2)

        def other() -> None:
            barrier.wait()
            host.send(sid, "Write another short report")

        thread = threading.Thread(target=other)
        thread.start()
        barrier.wait()
        driver.start_turn(sid, "And one more")
        thread.join(60)
        state = host.settle(sid, timeout=120)
    assert len(state["turns"]) == 3, "each message is one turn, none lost or doubled"
    assert all(t["stop_reason"] == "end_turn" for t in state["turns"])
    history = host.history(sid)
    _assert_log_is_gapless(history)
    active: set[str] = set()
    for action in history:  # bounded: one turn runs at a time, the others wait their turn
        if action["type"] == "turn.state" and action["data"]["state"] != "queued":
            active.add(action["turn_id"])
        elif action["type"] == "turn.ended":
            active.discard(action["turn_id"])
        assert len(active) <= 1, f"two turns ran at once at seq {action['seq']}"
    driver.converged(sid, timeout=90)
    _assert_received_in_order(driver.received(sid), history)
