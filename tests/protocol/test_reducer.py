"""Reducer rules with hand-computed expectations (independent of the generated vectors)."""

from __future__ import annotations

from typing import Any

import pytest

from opennua.protocol.actions import action_from_dict
from opennua.protocol.reducer import InvalidAction, SequenceGap, reduce, replay
from opennua.protocol.state import copy_state, initial_state, state_to_json
from tests.conformance.authoring import Log
from tests.conformance.sources import VECTORS


def _state(name: str) -> Any:
    return replay(action_from_dict(raw) for raw in VECTORS[name][1]().actions)


def test_duplicate_leaves_the_state_byte_identical() -> None:
    log = VECTORS["turn_simple"][1]()
    state = replay(action_from_dict(raw) for raw in log.actions)
    before = state_to_json(state)
    for raw in log.actions:
        state = reduce(state, action_from_dict(raw))
    assert state_to_json(state) == before


def test_gap_carries_the_expected_seq_and_changes_nothing() -> None:
    log = Log()
    log.session()
    log.add("session.updated", {"title": "x"}, seq=4)
    state = reduce(initial_state(), action_from_dict(log.actions[0]))
    before = state_to_json(state)
    with pytest.raises(SequenceGap) as caught:
        reduce(state, action_from_dict(log.actions[1]))
    assert (caught.value.expected, caught.value.got) == (2, 4)
    assert state_to_json(state) == before


def test_unknown_type_advances_seq_only() -> None:
    state = _state("unknown_type")
    assert state["seq"] == 4
    assert state["anomalies"] == []
    assert len(state["turns"]) == 1


def test_an_action_without_seq_is_invalid_and_changes_nothing() -> None:
    raw = dict(Log().add("session.created", {"title": "t"}))
    raw.pop("seq")
    state = initial_state()
    with pytest.raises(InvalidAction):
        reduce(state, action_from_dict(raw))
    assert state == initial_state()


def test_usage_is_summed_per_turn_model_worker_and_session() -> None:
    state = _state("usage_two_models_and_worker")
    first, second = state["turns"]
    # n=1 and n=3 on gpt-5 in the root run, n=2 on claude in the worker, n=1 in turn 2.
    assert first["usage_by_model"]["openai:gpt-5"]["input_tokens"] == 400
    assert first["usage_by_model"]["anthropic:claude-sonnet-4-5"]["input_tokens"] == 200
    assert first["usage"] == {
        "input_tokens": 600,
        "output_tokens": 120,
        "cache_read_input_tokens": 360,
        "cache_creation_input_tokens": 60,
        "reasoning_output_tokens": 30,
    }
    assert first["workers"]["run_worker"]["usage"]["cache_read_input_tokens"] == 120
    assert second["usage"]["input_tokens"] == 100
    assert state["usage"]["input_tokens"] == 700
    assert state["usage_by_model"]["anthropic:claude-sonnet-4-5"]["output_tokens"] == 60


def test_nested_worker_usage_rolls_up_to_every_ancestor() -> None:
    turn = _state("worker_in_worker")["turns"][0]
    assert turn["workers"]["run_worker2"]["usage"]["input_tokens"] == 100
    assert turn["workers"]["run_worker"]["usage"]["input_tokens"] == 300
    assert turn["usage"]["input_tokens"] == 600
    assert turn["timeline"][-1] == {"kind": "worker", "id": "run_worker"}
    assert turn["workers"]["run_worker"]["timeline"][-1] == {"kind": "worker", "id": "run_worker2"}


def test_worker_items_nest_under_the_worker_not_the_turn() -> None:
    turn = _state("worker_nested")["turns"][0]
    worker = turn["workers"]["run_worker"]
    assert [item["id"] for item in worker["timeline"]] == ["call_w1", "msg_w1"]
    assert worker["plan"][0]["id"] == "w1"
    assert turn["plan"][0]["id"] == "p1"
    assert worker["parent_tool_call_id"] == "call_task"
    assert [item["id"] for item in turn["timeline"]] == [
        "msg_user_01",
        "call_task",
        "run_worker",
        "msg_a1",
    ]


def test_timeline_is_order_of_first_appearance() -> None:
    turn = _state("timeline_interleave")["turns"][0]
    assert [(i["kind"], i["id"]) for i in turn["timeline"]] == [
        ("message", "msg_user_01"),
        ("message", "msg_a1"),
        ("tool_call", "call_01"),
        ("tool_call", "call_task"),
        ("worker", "run_worker"),
        ("message", "msg_a2"),
    ]
    assert turn["messages"]["msg_a1"]["text"] == "Working on it"


def test_hitl_status_follows_the_request() -> None:
    log = VECTORS["hitl_resolved"][1]()
    state = initial_state()
    statuses = []
    for raw in log.actions:
        state = reduce(state, action_from_dict(raw))
        statuses.append(state["status"])
    assert "requires_action" in statuses
    assert statuses[-1] == "idle"
    request = state["turns"][0]["input_requests"]["req_01"]
    assert request["answered_by"] == {
        "client_id": "cli_phone",
        "principal_id": "prn_owner",
        "on_behalf_of": None,
    }
    assert request["option_id"] == "allow"


def test_a_turn_is_queued_from_its_start_and_running_from_each_attempt() -> None:
    log = VECTORS["turn_states_from_facts"][1]()
    state = initial_state()
    seen = []
    for raw in log.actions:
        state = reduce(state, action_from_dict(raw))
        if state["turns"]:
            seen.append((raw["type"], state["turns"][0]["state"], state["status"]))
    assert seen[:4] == [
        ("turn.started", "queued", "running"),
        ("execution.attempt_started", "running", "running"),
        ("turn.state", "requires_action", "requires_action"),
        ("execution.attempt_started", "running", "running"),
    ]
    assert seen[-1] == ("turn.ended", "ended", "idle")
    # An attempt reported after the turn ended (a late writer) does not reopen it.
    log.attempt("trn_01", 3)
    after = reduce(state, action_from_dict(log.actions[-1]))
    assert after["turns"][0]["state"] == "ended" and after["anomalies"] == []


def test_cancelled_turn_is_not_waiting_for_input() -> None:
    state = _state("cancelled_turn_with_open_request")
    assert state["open_input_requests"] == []
    assert state["status"] == "idle"
    assert state["turns"][0]["input_requests"]["req_01"]["outcome"] == "cancelled"


def test_second_resolution_keeps_the_first_and_records_an_anomaly() -> None:
    state = _state("hitl_second_resolution")
    request = state["turns"][0]["input_requests"]["req_01"]
    assert request["option_id"] == "allow"
    assert [a["reason"] for a in state["anomalies"]] == ["input request req_01 is already resolved"]


def test_anomalies_never_raise_and_name_the_entity() -> None:
    state = _state("anomalies_unknown_entities")
    reasons = [a["reason"] for a in state["anomalies"]]
    assert reasons == [
        "unknown message msg_nope",
        "unknown tool call call_nope",
        "unknown turn trn_nope",
        "action has no turn_id",
        "unknown worker run_nope",
        "unknown input request req_nope",
        "unknown message msg_nope",
        "unknown turn trn_nope",
    ]
    assert state["artifacts"] == {}
    assert state["usage"]["input_tokens"] == 0


def test_interrupted_stream_keeps_the_partial_text() -> None:
    turn = _state("interrupted_stream")["turns"][0]
    assert turn["messages"]["msg_a1"] == {
        "message_id": "msg_a1",
        "role": "assistant",
        "run_id": "run_root",
        "text": "The answer is",
        "status": "interrupted",
        "content": None,
    }
    assert [a["attempt"] for a in turn["attempts"]] == [1, 2]
    assert turn["attempts"][1]["resumed_from_checkpoint"] is True


def test_retried_turn_links_to_the_original() -> None:
    first, second = _state("retried_turn")["turns"]
    assert first["stop_reason"] == "failed"
    assert second["retry_of"] == "trn_01"
    assert second["trigger"]["kind"] == "retry"


def test_reduce_owns_the_state_and_copy_state_keeps_the_old_one() -> None:
    log = VECTORS["turn_simple"][1]()
    actions = [action_from_dict(raw) for raw in log.actions]
    state = replay(actions[:3])
    kept = copy_state(state)
    advanced = reduce(state, actions[3])
    assert advanced["seq"] == kept["seq"] + 1
    assert kept["seq"] == 3
