"""Property: however a valid log is delivered — with duplicates, or with gaps repaired by
a resync from a snapshot — the client converges on the canonical state of the clean log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opennua._common import json_text
from opennua.protocol.actions import action_from_dict
from opennua.protocol.reducer import SequenceGap, reduce, replay
from opennua.protocol.state import initial_state, state_from_json, state_to_json
from tests.conformance.authoring import Log

R = "run_root"
SEGMENTS = (
    "stream",
    "reasoning",
    "tool",
    "worker",
    "approval",
    "usage",
    "plan",
    "file",
    "artifact",
)


def _turn_body(log: Log, turn: str, segments: list[str], tag: str) -> None:
    for n, segment in enumerate(segments):
        key = f"{tag}_{n}"
        if segment == "stream":
            log.stream(turn, R, f"msg_{key}", "a", "b", "c")
        elif segment == "reasoning":
            log.add(
                "reasoning.delta", {"message_id": f"msg_{key}", "delta": "hm"}, turn=turn, run=R
            )
        elif segment == "tool":
            log.tool(turn, R, f"call_{key}")
            log.tool_done(turn, R, f"call_{key}")
        elif segment == "worker":
            worker = f"run_{key}"
            log.tool(turn, R, f"call_{key}", name="task", kind="other")
            log.add(
                "worker.started",
                {
                    "worker_run_id": worker,
                    "parent_run_id": R,
                    "parent_tool_call_id": f"call_{key}",
                    "name": "w",
                    "task": "t",
                },
                turn=turn,
                run=R,
            )
            log.tool(turn, worker, f"call_{key}_w")
            log.usage(turn, worker, model="small")
            log.add(
                "worker.ended", {"worker_run_id": worker, "status": "completed"}, turn=turn, run=R
            )
        elif segment == "approval":
            log.add(
                "input_request.opened",
                {"request_id": f"req_{key}", "reason": "input_required", "prompt": "?"},
                turn=turn,
                run=R,
            )
            log.add(
                "input_request.resolved",
                {"request_id": f"req_{key}", "outcome": "answered", "payload": "yes"},
                turn=turn,
            )
        elif segment == "usage":
            log.usage(turn, R, model="big", n=n + 1)
        elif segment == "plan":
            log.add(
                "plan.updated",
                {"entries": [{"id": key, "content": "c", "status": "pending"}]},
                turn=turn,
                run=R,
            )
        elif segment == "file":
            log.add("file.changed", {"path": f"{key}.md", "change": "created"}, turn=turn, run=R)
        else:
            log.add(
                "artifact.published",
                {
                    "artifact_id": f"art_{key}",
                    "name": "r.md",
                    "media_type": "text/markdown",
                    "size": 1,
                    "sha256": "a" * 64,
                },
                turn=turn,
                run=R,
            )


@st.composite
def logs(draw: st.DrawFn) -> Log:
    log = Log()
    log.session()
    for t in range(draw(st.integers(1, 3))):
        turn = f"trn_{t:02d}"
        log.turn(turn)
        log.start(turn)
        _turn_body(log, turn, draw(st.lists(st.sampled_from(SEGMENTS), max_size=6)), f"{t}")
        log.end(turn, draw(st.sampled_from(["end_turn", "cancelled", "failed"])))
    return log


@settings(max_examples=150, deadline=None)
@given(log=logs(), data=st.data())
def test_duplicates_and_resynced_gaps_converge(log: Log, data: st.DataObject) -> None:
    actions = [action_from_dict(raw) for raw in log.actions]
    total = len(actions)
    snapshots = [state_to_json(initial_state())]
    state = initial_state()
    for action in actions:
        state = reduce(state, action)
        snapshots.append(state_to_json(state))
    assert snapshots[-1] == state_to_json(replay(actions))

    client = initial_state()
    delivered = 0
    for _ in range(4 * total):
        if delivered == total:
            break
        move = data.draw(st.sampled_from(["next", "next", "next", "duplicate", "skip"]))
        if move == "duplicate" and delivered:
            before = state_to_json(client)
            client = reduce(client, actions[data.draw(st.integers(0, delivered - 1))])
            assert state_to_json(client) == before
        elif move == "skip" and delivered + 1 < total:
            ahead = data.draw(st.integers(delivered + 1, total - 1))
            try:
                reduce(client, actions[ahead])
            except SequenceGap as gap:
                assert gap.expected == delivered + 1
            else:
                raise AssertionError("a gap went unnoticed")
            # Resync: the server hands over a snapshot at least as new as the client.
            delivered = data.draw(st.integers(delivered, total))
            client = state_from_json(snapshots[delivered])
        else:
            client = reduce(client, actions[delivered])
            delivered += 1
    for action in actions[delivered:]:
        client = reduce(client, action)
    assert state_to_json(client) == snapshots[-1]


@st.composite
def logs_with_late_actions(draw: st.DrawFn) -> Log:
    """A log whose turns ended, then actions naming earlier turns again (a late usage, a
    file change, an artifact; most are anomalies on an ended turn)."""
    log = draw(logs())
    turns = sorted({a["turn_id"] for a in log.actions if a["turn_id"]})
    late = st.tuples(st.sampled_from(turns), st.sampled_from(SEGMENTS))
    for n, (turn, segment) in enumerate(draw(st.lists(late, max_size=6))):
        _turn_body(log, turn, [segment], f"late{n}")
    return log


@settings(max_examples=150, deadline=None)
@given(log=logs_with_late_actions())
def test_an_action_changes_no_turn_but_the_one_it_names(log: Log) -> None:
    """What a Host's snapshots rely on to keep the text of unchanged turns
    (`opennua.host._snapshot_text`): a turn changes only by an action naming it."""
    state = initial_state()
    for raw in log.actions:
        before = {turn["turn_id"]: json_text(turn) for turn in state["turns"]}
        state = reduce(state, action_from_dict(raw))
        for turn in state["turns"]:
            if turn["turn_id"] != raw["turn_id"] and turn["turn_id"] in before:
                assert json_text(turn) == before[turn["turn_id"]], raw["type"]
