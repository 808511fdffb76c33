"""How the CLI draws the states the protocol gained: a tool call `rejected` (not failed), a
turn retrying its model call (`turn.model_retry`), and a turn waiting for the model (a
projection of state). Drawn from reduced actions, so live, reattach and history agree."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from opennua.cli._context import answerer, who_answered
from opennua.cli._live import Follower
from opennua.cli._render import (
    current_step,
    is_final,
    model_retry_text,
    render_session,
    waiting_for_model,
)
from opennua.cli._safe import SafeConsole
from opennua.client import LocalSession
from opennua.protocol import SessionState, action_from_dict, replay
from tests.conformance.authoring import Log

VECTORS = Path(__file__).parents[1] / "conformance" / "vectors"
T, R = "trn_01", "run_root"


def _vector(name: str, upto: int | None = None) -> SessionState:
    actions = json.loads((VECTORS / f"{name}.json").read_text())["actions"][:upto]
    return replay(action_from_dict(a) for a in actions)


def _text(*renderables: Any) -> str:
    out = io.StringIO()
    SafeConsole(file=out, width=120).print(*renderables)
    return out.getvalue()


def test_a_rejected_call_is_its_own_status_and_final() -> None:
    state = _vector("hitl_rejected")
    turn = state["turns"][0]
    shown = _text(render_session(state))
    assert "⊗ shell call_shell" in shown and "[rejected]" in shown, shown
    assert "⎿ The user rejected this tool call." in shown
    assert "failed" not in shown
    assert is_final(turn, {"kind": "tool_call", "id": "call_shell"})


def _follower(state: SessionState) -> tuple[Follower, io.StringIO]:
    out = io.StringIO()
    console = SafeConsole(file=out, width=120)
    session = SimpleNamespace(local=LocalSession(state), client=SimpleNamespace(client_id="c"))
    follower = Follower(session, console, console, turn_id=T)  # type: ignore[arg-type]
    return follower, out


def test_the_live_view_prints_what_follows_a_rejected_call_at_once() -> None:
    # The turn goes on after a rejection: its next items are printed as they become final,
    # not held back until the turn ends behind a call that never "completes".
    log = Log()
    log.session()
    log.turn(T)
    log.start(T)
    call = {"tool_call_id": "call_1", "name": "shell", "title": "Run command", "kind": "execute"}
    log.add("tool_call.started", call | {"input": {"command": "rm -rf /"}}, turn=T, run=R)
    error = {"code": "rejected", "message": "The user rejected this tool call."}
    update = {"tool_call_id": "call_1", "status": "rejected", "error": error}
    log.add("tool_call.updated", update, turn=T, run=R)
    log.add(
        "message.added",
        {
            "message_id": "msg_2",
            "role": "assistant",
            "content": [{"type": "text", "text": "I will not run it then."}],
        },
        turn=T,
        run=R,
    )
    _started("msg_3")(log)
    _delta("msg_3", "still going")(log)
    follower, out = _follower(replay(action_from_dict(a) for a in log.actions))
    assert follower._progress() is None, "the turn has not ended"
    printed = out.getvalue()
    assert "⊗ Run command rm -rf /  [rejected]" in printed
    assert "I will not run it then." in printed
    assert "still going" not in printed, "a message still streaming is not printed yet"


def test_a_model_retry_is_shown_with_its_time_and_error_then_cleared() -> None:
    retrying = _vector("model_retry", 5)
    turn = retrying["turns"][0]
    retry = turn["model_retry"]
    assert retry is not None
    at = datetime.fromisoformat(retry["retry_at"]).astimezone().strftime("%H:%M:%S")
    expected = (
        f"retrying the model (attempt 1) at {at} — model_rate_limited: {retry['error']['message']}"
    )
    assert model_retry_text(retry) == expected
    assert expected in _text(render_session(retrying))
    # On the live view's spinner it counts down, from the injected clock.
    now = datetime(2026, 11, 29, 8, 0, 5, tzinfo=UTC)
    assert current_step(turn, now).startswith(f"retrying the model (attempt 1) at {at}, in 4 s")
    later = datetime(2026, 11, 29, 8, 0, 10, tzinfo=UTC)
    assert f"at {at}, now —" in current_step(turn, later)
    follower, _ = _follower(retrying)
    follower.now = lambda: now
    assert "in 4 s" in _text(follower._footer())
    cleared = _vector("model_retry", 6)
    assert "retrying the model" not in _text(render_session(cleared))
    assert "retrying" not in current_step(cleared["turns"][0], now)


def _running(*build: Any) -> SessionState:
    log = Log()
    log.session()
    log.turn(T)
    log.start(T)
    for step in build:
        step(log)
    return replay(action_from_dict(a) for a in log.actions)


def _started(message: str, run: str = R) -> Any:
    return lambda log: log.add(
        "message.started", {"message_id": message, "role": "assistant"}, turn=T, run=run
    )


def _delta(message: str, text: str, run: str = R) -> Any:
    return lambda log: log.add(
        "message.delta", {"message_id": message, "delta": text}, turn=T, run=run
    )


def _worker(log: Log) -> None:
    call = {"tool_call_id": "call_task", "name": "task", "title": "Run sub-agent", "kind": "other"}
    log.add("tool_call.started", call | {"input": {"name": "researcher"}}, turn=T, run=R)
    worker = {"worker_run_id": "run_w", "parent_run_id": R, "parent_tool_call_id": "call_task"}
    log.add("worker.started", worker | {"name": "researcher", "task": "read"}, turn=T, run=R)


def test_waiting_for_the_model_is_a_projection_of_the_state() -> None:
    # Nothing yet after the user's message; then an empty streaming answer.
    for state in (_running(), _running(_started("msg_1"))):
        turn = state["turns"][0]
        assert waiting_for_model(turn) == ""
        assert current_step(turn) == "waiting for the model"
        assert "… waiting for the model" in _text(render_session(state))
    # Text is arriving, or the turn waits for a person: not waiting for the model.
    streaming = _running(_started("msg_1"), _delta("msg_1", "Hel"))
    assert waiting_for_model(streaming["turns"][0]) is None
    assert "waiting for the model" not in _text(render_session(streaming))
    # A sub-agent's model: named, whether it has asked yet or not.
    asked = _running(_worker, _started("msg_w", "run_w"))
    for state in (_running(_worker), asked):
        assert current_step(state["turns"][0]) == "researcher: waiting for the model"
    answering = _running(_worker, _started("msg_w", "run_w"), _delta("msg_w", "x", "run_w"))
    assert waiting_for_model(answering["turns"][0]) is None
    # A retry says more than "waiting": it wins.
    retrying = _vector("model_retry", 5)
    assert waiting_for_model(retrying["turns"][0]) is None
    assert current_step(retrying["turns"][0]).startswith("retrying the model")


def test_a_restored_workspace_and_what_it_lost_are_drawn() -> None:
    shown = _text(render_session(_vector("workspace_restored")))
    assert "⟲ attempt 2: workspace restored (3 files, manifest bbbbbbbbbbbb)" in shown, shown
    assert "lost uncommitted changes: draft.md" in shown
    assert "changes made by call_shell after the last commit are lost" in shown
    quiet = _text(render_session(_vector("workspace_restored_empty")))
    assert "⟲ attempt 2: workspace restored (0 files, no commit yet)" in quiet, quiet
    assert "lost" not in quiet


def test_file_changes_show_a_bounded_diff_a_reference_or_binary_facts() -> None:
    state = _vector("file_changed")
    shown = _text(render_session(state))
    assert "✎ notes.md modified · 4 B" in shown
    assert "  -one" in shown and "  +two" in shown
    big = next(k for k, c in state["turns"][0]["file_changes"].items() if c["path"] == "big.txt")
    assert f"diff stored by reference: nua diff SID {big}" in shown
    assert "✎ logo.png modified · 2,048 B · binary, sha256 020202020202" in shown
    # A long diff is cut at DIFF_LINES_SHOWN lines, the rest counted.
    log = Log()
    log.session()
    log.turn(T)
    log.start(T)
    diff = "--- /dev/null\n+++ b/long.txt\n@@ -0,0 +1,100 @@\n" + "".join(
        f"+line {i}\n" for i in range(100)
    )
    log.add("file.changed", {"path": "long.txt", "change": "created", "diff": diff}, turn=T, run=R)
    shown = _text(render_session(replay(action_from_dict(a) for a in log.actions)))
    assert "+line 36" in shown and "+line 37" not in shown
    assert "… 63 more lines: nua diff SID" in shown


def test_who_answered_in_chat_is_the_person_everywhere_the_cli_says_it() -> None:
    # The CLI that lost to the chat bridge was told the bridge's client id (issue 35).
    state = _vector("hitl_answered_in_chat")
    shown = _text(render_session(state))
    assert "answered by @alice:example.org (via cli_bridge, principal prn_bridge)" in shown
    request = state["turns"][0]["input_requests"]["req_01"]
    resolution = {**request, "outcome": "selected"}
    lost = who_answered(dict(resolution))  # the loser's message (`nua answer`, the live view)
    assert lost.startswith("req_01 was already answered by @alice:example.org (via cli_bridge")
    assert answerer({"client_id": "cli_a", "principal_id": "prn_a"}) == "cli_a (principal prn_a)"


def test_a_structured_result_is_shown_pretty_printed_whole() -> None:
    state = _vector("structured_output")
    shown = _text(render_session(state))
    result = state["turns"][0]["output"]
    pretty = json.dumps(result, indent=2, ensure_ascii=False).splitlines()
    lines = shown.splitlines()
    start = lines.index("  result")
    assert lines[start + 1 : start + 1 + len(pretty)] == [f"    {line}" for line in pretty]
    assert lines[start + 1 + len(pretty)].strip().startswith("■ end_turn")
    # A turn that failed output_invalid has no result, only its error.
    second = shown[shown.index("── turn trn_02") :]
    assert "result" not in second and "■ failed" in second and "output_invalid" in second
