"""The pure half of `nua acp`: our actions as ACP `session/update`s (no processes)."""

from __future__ import annotations

from typing import Any

from opennua.protocols.acp import Projection


def _action(type_: str, run: str = "run_root", **data: Any) -> dict[str, Any]:
    return {"type": type_, "run_id": run, "turn_id": "trn_1", "intent_id": None, "data": data}


def _dump(updates: list[Any]) -> list[dict[str, Any]]:
    return [u.model_dump(mode="json", by_alias=True, exclude_none=True) for u in updates]


def test_a_completion_adds_only_what_the_deltas_did_not_say() -> None:
    p = Projection("http://h")
    out = [
        *p.updates(_action("message.delta", message_id="msg_1", delta="Hel")),
        *p.updates(_action("message.delta", message_id="msg_1", delta="lo")),
        *p.updates(
            _action("message.completed", message_id="msg_1", text="Hello world", status="complete")
        ),
        *p.updates(_action("message.completed", message_id="msg_2", text="", status="complete")),
    ]
    assert [u["content"]["text"] for u in _dump(out)] == ["Hel", "lo", " world"]
    assert {u["messageId"] for u in _dump(out)} == {"msg_1"}


def test_a_sub_agent_shows_its_tool_calls_but_not_its_words_or_plan() -> None:
    p = Projection("http://h")
    p.updates(
        _action(
            "worker.started",
            worker_run_id="run_w",
            parent_run_id="run_root",
            parent_tool_call_id="call_t",
            name="r",
            task="t",
        )
    )
    assert p.updates(_action("message.delta", "run_w", message_id="m", delta="x")) == []
    assert p.updates(_action("reasoning.delta", "run_w", message_id="m", delta="x")) == []
    assert p.updates(_action("plan.updated", "run_w", entries=[])) == []
    [start] = _dump(
        p.updates(
            _action(
                "tool_call.started",
                "run_w",
                tool_call_id="call_w",
                name="read_file",
                title="Read file",
                kind="read",
                input={"path": "a"},
            )
        )
    )
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_w",
        "title": "Read file",
        "kind": "read",
        "status": "pending",
        "rawInput": {"path": "a"},
    }


def test_a_tool_call_keeps_its_diff_output_and_error_and_ends_failed_when_rejected() -> None:
    p = Projection("http://h")
    p.updates(
        _action("file.changed", tool_call_id="call_1", path="a.md", change="created", diff="+x")
    )
    [done] = _dump(
        p.updates(
            _action("tool_call.updated", tool_call_id="call_1", status="completed", output="ok")
        )
    )
    assert done["status"] == "completed" and done["locations"] == [{"path": "a.md"}]
    assert [c["content"]["text"] for c in done["content"]] == ["```diff\n+x\n```", "ok"]
    [no] = _dump(
        p.updates(
            _action(
                "tool_call.updated",
                tool_call_id="call_2",
                status="rejected",
                error={"code": "rejected", "message": "a person said no"},
            )
        )
    )
    assert no["status"] == "failed"
    assert no["content"][0]["content"]["text"] == "rejected: rejected: a person said no"


def test_a_prompt_is_echoed_unless_this_editor_sent_it_and_artifacts_are_links() -> None:
    p = Projection("http://h/", own_intents={"int_mine"})
    mine = _action("turn.started", input=[{"type": "text", "text": "hi"}], message_id="msg_u")
    mine["intent_id"] = "int_mine"
    assert p.updates(mine) == []
    theirs = _action("turn.started", input=[{"type": "text", "text": "yo"}], message_id="msg_v")
    assert _dump(p.updates(theirs))[0]["content"] == {"type": "text", "text": "yo"}
    [link] = _dump(
        p.updates(
            _action(
                "artifact.published",
                artifact_id="art_1",
                name="r.md",
                media_type="text/markdown",
                size=3,
                sha256="0" * 64,
            )
        )
    )
    assert link["content"] == {
        "type": "resource_link",
        "uri": "http://h/v1/artifacts/art_1/content",
        "name": "r.md",
        "mimeType": "text/markdown",
        "size": 3,
    }
