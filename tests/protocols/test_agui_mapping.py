"""The AG-UI mapping without a server: every conformance vector's log, followed from every
point in it, gives a client the same messages and shared state as a snapshot of where the
run ended, through events a client accepts (a minimal AG-UI client below checks the
stream's rules as `@ag-ui/client`'s `verifyEvents` does and applies it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent
from hypothesis import given
from hypothesis import strategies as st

from opennua.protocol import action_from_dict, initial_state, reduce
from opennua.protocol.state import SessionState
from opennua.protocols.agui import RunStream, json_patch, messages, shared_state

VECTORS = sorted((Path(__file__).parents[1] / "conformance" / "vectors").glob("*.json"))


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/remove/replace, strictly (a wrong path raises)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            assert op["op"] == "replace"
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = int(last)
            if op["op"] == "add":
                assert index <= len(parent)
                parent.insert(index, op["value"])
            elif op["op"] == "remove":
                del parent[index]
            else:
                parent[index] = op["value"]
        else:
            if op["op"] in ("remove", "replace"):
                assert last in parent
            if op["op"] == "remove":
                del parent[last]
            else:
                parent[last] = op["value"]
    return doc


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="ab/~", max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON, JSON)
def test_a_patch_turns_the_old_document_into_the_new(old: Any, new: Any) -> None:
    patched = apply_patch(old, json_patch(old, new))
    assert json.dumps(patched, sort_keys=True) == json.dumps(new, sort_keys=True)


def test_equal_documents_need_no_patch_but_one_and_true_differ() -> None:
    assert json_patch({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]}) == []
    assert json_patch({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]


class Client:
    """What an AG-UI client holds after a run, checking the rules it checks."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.state: Any = {}
        self.open: set[tuple[str, str]] = set()
        self.subagents: set[str] = set()
        self.ended = False

    def apply(self, event: BaseEvent) -> None:
        e = json.loads(event.model_dump_json(by_alias=True))
        kind = e["type"]
        assert not self.ended, f"{kind} after the run ended"
        assert e.get("subagentRunId", "") is not None
        if kind == "MESSAGES_SNAPSHOT":
            self.messages = {m["id"]: _message(m) for m in e["messages"]}
        elif kind == "STATE_SNAPSHOT":
            self.state = e["snapshot"]
        elif kind == "STATE_DELTA":
            self.state = apply_patch(self.state, e["delta"])
        elif kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            key = ("text", e["messageId"])
            assert key not in self.open, f"{kind} twice"
            self.open.add(key)
            role = "assistant" if kind == "TEXT_MESSAGE_START" else "reasoning"
            self.messages.setdefault(e["messageId"], {"role": role, "text": ""})
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            assert ("text", e["messageId"]) in self.open, f"{kind} of a closed message"
            self.messages[e["messageId"]]["text"] += e["delta"]
        elif kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            self.open.remove(("text", e["messageId"]))
        elif kind == "REASONING_START":
            self.open.add(("span", e["messageId"]))
        elif kind == "REASONING_END":
            self.open.remove(("span", e["messageId"]))
        elif kind == "TOOL_CALL_START":
            self.open.add(("call", e["toolCallId"]))
            self.messages[e["toolCallId"]] = {"role": "call", "name": e["toolCallName"], "args": ""}
        elif kind == "TOOL_CALL_ARGS":
            assert ("call", e["toolCallId"]) in self.open
            self.messages[e["toolCallId"]]["args"] += e["delta"]
        elif kind == "TOOL_CALL_END":
            self.open.remove(("call", e["toolCallId"]))
        elif kind == "TOOL_CALL_RESULT":
            self.messages[e["messageId"]] = {"role": "tool", "text": e["content"]}
        elif kind == "SUBAGENT_STARTED":
            assert e["subagentRunId"] not in self.subagents
            self.subagents.add(e["subagentRunId"])
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            self.subagents.remove(e["subagentRunId"])
        elif kind == "STEP_STARTED":
            self.open.add(("step", e["stepName"]))
        elif kind == "STEP_FINISHED":
            self.open.remove(("step", e["stepName"]))
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            if kind == "RUN_FINISHED":
                assert not self.open and not self.subagents, f"left open: {self.open}"
            self.ended = True


def _message(m: dict[str, Any]) -> dict[str, Any]:
    if m["role"] == "assistant" and m.get("toolCalls"):
        [call] = m["toolCalls"]
        function = call["function"]
        return {"role": "call", "name": function["name"], "args": function["arguments"]}
    return {"role": m["role"], "text": m["content"]}


def _snapshot_view(state: SessionState) -> dict[str, dict[str, Any]]:
    out = {}
    for message in messages(state):
        m = json.loads(message.model_dump_json(by_alias=True))
        if m["role"] != "user":
            out[m["id"]] = _message(m)
    return out


def _states(vector: Path) -> tuple[list[dict[str, Any]], list[SessionState]]:
    actions = json.loads(vector.read_text())["actions"]
    states = [initial_state()]
    for action in actions:
        states.append(reduce(copy.deepcopy(states[-1]), action_from_dict(action)))
    return actions, states


def _followable(vector: Path) -> bool:
    """A log with a turn that a Host could have appended (no gap: the Hub never has one)."""
    actions = json.loads(vector.read_text())["actions"]
    seqs = sorted({a["seq"] for a in actions})
    return any(a["type"] == "turn.started" for a in actions) and seqs == list(
        range(1, len(seqs) + 1)
    )


@pytest.mark.parametrize("vector", [v for v in VECTORS if _followable(v)], ids=lambda v: v.stem)
def test_a_run_from_any_point_of_a_log_converges_on_its_snapshot(vector: Path) -> None:
    actions, states = _states(vector)
    begins = {a["turn_id"]: i for i, a in enumerate(actions) if a["type"] == "turn.started"}
    for turn_id, started in begins.items():
        for cut in range(started, len(actions) + 1):
            fresh = cut == started  # the run that started the turn sees it from before it
            stream = RunStream(
                states[cut], thread_id="t", run_id="r", turn_id=turn_id, reconnect=not fresh
            )
            client = Client()
            for event in stream.opening():
                client.apply(event)
            for action in actions[cut:]:
                if stream.done:
                    break
                for event in stream.feed(action):
                    client.apply(event)
            where = f"{turn_id} from action {cut}"
            assert client.state == shared_state(stream.state, turn_id), where
            expected = _snapshot_view(stream.state)
            turn_items = {k: v for k, v in client.messages.items() if k in expected}
            if fresh:  # a new turn: the client held the history before, not from us
                expected = {k: v for k, v in expected.items() if k in client.messages}
            assert turn_items == expected, where
            assert client.ended == stream.done, where
