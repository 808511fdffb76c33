"""The bridge's pure parts: identities, retry timing, answer parsing, the card."""

from __future__ import annotations

import json
from typing import Any

from opennua.bridge import RetryPolicy, delivery_id
from opennua.bridge._answers import Choice, Refusal, from_reaction, from_text
from opennua.bridge._render import card, edit_content, request_message
from opennua.protocol import action_from_dict, replay, state_to_json


def _request(**extra: Any) -> Any:
    return {
        "request_id": "req_1",
        "prompt": "Run `wc -l`?",
        "options": [
            {"option_id": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"option_id": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
        "response_schema": None,
        "status": "open",
        **extra,
    }


def test_a_delivery_id_is_derived_from_what_it_delivers() -> None:
    one = delivery_id("ses_a", "trn_1", "card")
    assert one == delivery_id("ses_a", "trn_1", "card") and one.startswith("dlv_")
    others = {delivery_id("ses_b", "trn_1", "card"), delivery_id("ses_a", "trn_2", "card"),
              delivery_id("ses_a", "trn_1", "request")}  # fmt: skip
    assert one not in others and len(others) == 3


def test_backoff_grows_to_its_cap_with_jitter_and_gives_up() -> None:
    policy = RetryPolicy(base=1.0, cap=8.0, max_attempts=5)
    assert [policy.delay(n, 0.0) for n in (1, 2, 3, 4, 5, 9)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [policy.delay(n, 0.999) for n in (1, 4)] == [0.9995, 7.996]
    assert not policy.gives_up(4, permanent=False)
    assert policy.gives_up(5, permanent=False) and policy.gives_up(1, permanent=True)


def test_a_reply_names_an_option_by_number_id_or_name() -> None:
    request = _request()
    assert from_text(request, "1") == Choice(option_id="allow_once")
    assert from_text(request, " reject_once ") == Choice(option_id="reject_once")
    assert from_text(request, "allow ONCE") == Choice(option_id="allow_once")
    refused = from_text(request, "3")
    assert isinstance(refused, Refusal) and refused.message.startswith("There is no option 3.")
    assert "1, 2 or one of: allow_once, reject_once" in refused.message
    unknown = from_text(request, "maybe")
    assert isinstance(unknown, Refusal) and "'maybe'" in unknown.message


def test_free_text_answers_a_request_without_options() -> None:
    ask = _request(options=None)
    assert from_text(ask, "blue, please") == Choice(payload="blue, please")
    assert isinstance(from_text(ask, "  "), Refusal)
    structured = _request(options=None, response_schema={"type": "object"})
    assert isinstance(from_text(structured, "x"), Refusal)


def test_reactions_map_to_allow_and_reject_options() -> None:
    request = _request()
    assert from_reaction(request, "✅") == Choice(option_id="allow_once")
    assert from_reaction(request, "❌") == Choice(option_id="reject_once")
    assert from_reaction(request, "👍") is None
    only_allow = _request(options=[request["options"][0]])
    assert isinstance(from_reaction(only_allow, "❌"), Refusal)


def test_the_request_message_lists_the_options_and_escapes_html() -> None:
    body, formatted = request_message(_request(prompt="<b>rm</b>?"))
    assert body.splitlines()[1:3] == ["1. Allow once (allow_once)", "2. Reject (reject_once)"]
    assert "&lt;b&gt;rm&lt;/b&gt;" in formatted and "<b>rm" not in formatted


def test_an_edit_replaces_the_card_with_m_replace() -> None:
    content = edit_content("$card", "new", "<b>new</b>")
    assert content["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$card"}
    assert content["m.new_content"]["body"] == "new" and content["body"] == "* new"


def test_the_card_shows_plan_tools_answer_and_usage_at_the_end() -> None:
    base = {"v": 1, "session_id": "ses_a", "client_id": None, "intent_id": None,
            "ts": "2026-11-29T08:00:00.000Z", "turn_id": "trn_1", "run_id": "run_1"}  # fmt: skip
    rows: list[tuple[str, dict[str, Any]]] = [
        ("session.created", {"title": "t"}),
        ("turn.started", {"execution_id": "exe_1", "trigger": {"kind": "message",
         "principal_id": "prn_o"}, "input": [{"type": "text", "text": "hi"}],
         "message_id": "msg_u", "trace_id": "t" * 32}),
        ("plan.updated", {"entries": [{"id": "p1", "content": "Write", "status": "completed",
         "priority": "high"}]}),
        ("tool_call.started", {"tool_call_id": "call_1", "name": "shell", "title": "wc -l",
         "kind": "execute", "input": {}}),
        ("tool_call.updated", {"tool_call_id": "call_1", "status": "completed"}),
        ("message.added", {"message_id": "msg_a", "role": "assistant",
         "content": [{"type": "text", "text": "Done <now>"}]}),
        ("usage.recorded", {"provider": "p", "model": "m", "input_tokens": 7,
         "output_tokens": 3}),
        ("turn.ended", {"stop_reason": "end_turn"}),
    ]  # fmt: skip
    actions = [
        action_from_dict({**base, "seq": n, "id": f"act_{n}", "type": t, "data": d})
        for n, (t, d) in enumerate(rows, 1)
    ]
    state = replay(actions)
    body, formatted = card(state["turns"][0])
    assert body.splitlines() == [
        "✅ Done", "Plan", "✅ Write", "Tools", "✅ wc -l", "Done <now>",
        "Usage: 7 in · 3 out tokens",
    ]  # fmt: skip
    assert "Done &lt;now&gt;" in formatted
    running = replay(actions[:4])
    assert card(running["turns"][0])[0].splitlines()[0] == "⏳ Queued"  # no turn.state yet


def test_the_card_lists_tools_in_timeline_order_live_or_from_a_snapshot() -> None:
    """A snapshot's state has sorted keys; the card still follows the timeline, so a bridge
    that restarts from a snapshot edits the card to the same text (found by the
    conformance matrix, tests/conformance/test_matrix.py)."""
    base = {"v": 1, "session_id": "ses_a", "client_id": None, "intent_id": None,
            "ts": "2026-11-29T08:00:00.000Z", "turn_id": "trn_1", "run_id": "run_1"}  # fmt: skip
    rows: list[tuple[str, dict[str, Any]]] = [
        ("session.created", {"title": "t"}),
        ("turn.started", {"execution_id": "exe_1", "trigger": {"kind": "message",
         "principal_id": "prn_o"}, "input": [{"type": "text", "text": "hi"}],
         "message_id": "msg_u", "trace_id": "t" * 32}),
        ("tool_call.started", {"tool_call_id": "call_z", "name": "a", "title": "first",
         "kind": "other", "input": {}}),
        ("tool_call.started", {"tool_call_id": "call_a", "name": "b", "title": "second",
         "kind": "other", "input": {}}),
    ]  # fmt: skip
    actions = [
        action_from_dict({**base, "seq": n, "id": f"act_{n}", "type": t, "data": d})
        for n, (t, d) in enumerate(rows, 1)
    ]
    live = replay(actions)
    loaded = json.loads(state_to_json(live))  # what a snapshot gives: keys sorted
    assert list(loaded["turns"][0]["tool_calls"]) == ["call_a", "call_z"]
    for state in (live, loaded):
        lines = card(state["turns"][0])[0].splitlines()
        assert lines[lines.index("Tools") + 1 :] == ["○ first", "○ second"]
