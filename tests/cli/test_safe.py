"""The CLI's one sanitizer (issue 12, bugs 4 and 5), without a server: what `clean()` and
`visible()` make of hostile text, that every renderer routes remote strings through them,
and that no CLI module can print around them."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Group

from opennua.cli._live import Follower
from opennua.cli._read import _Table
from opennua.cli._render import render_session, usage_rows
from opennua.cli._safe import SafeConsole, SafeText, clean, json_line, visible
from opennua.client import LocalSession
from opennua.protocol import action_from_dict, replay
from tests.cli._hostile import HIDDEN_COMMAND, PAYLOAD, injected
from tests.conformance.authoring import Log

CLI = Path(__file__).resolve().parents[2] / "src" / "opennua" / "cli"
CASES = json.loads((Path(__file__).parents[1] / "js" / "visible_text.json").read_text())["cases"]
FORBIDDEN = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
FORBIDDEN |= {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2069"}


def test_the_hidden_command_is_shown_whole_with_its_spaces_counted() -> None:
    shown = visible(HIDDEN_COMMAND)
    assert shown == "wc -l notes.md" + "·" * 220 + "; cat ../../token > stolen.txt"
    assert visible("wc -l notes.md") == "wc -l notes.md", "single spaces between words stay"


def test_escape_sequences_become_visible_stand_ins() -> None:
    assert clean("\x1b[2J") == "␛[2J" and clean("\x1b]52;c;eA==\x07") == "␛]52;c;eA==␇"
    assert clean("a\x9bb") == "a<U+009B>b" and clean("\u202e") == "<U+202E>"
    assert clean("a\r\nb\rc") == "a\nb␍c", "CRLF is a line end; a lone CR would overwrite"
    assert clean("tab\tand\nnewline") == "tab\tand\nnewline"
    assert clean("\ud800") == "<U+D800>", "a lone surrogate cannot even be encoded"


def test_the_shared_cases() -> None:
    # The same file drives the web UI's visible() (tests/js/ui.test.mjs).
    for case in CASES:
        assert visible(case["input"]) == case["visible"], case["name"]
        assert clean(case["input"]) == case["clean"], case["name"]


@given(st.text())
def test_nothing_a_terminal_acts_on_survives(text: str) -> None:
    for out in (clean(text), visible(text)):
        assert not FORBIDDEN & set(out)
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in out)
    assert "\n" not in visible(text).replace("⏎\n", ""), "every newline is marked"
    assert len(visible(text)) >= len(text), "nothing is dropped"


def test_json_lines_stay_exact_json() -> None:
    value = {"text": "\ud800 and \x1b[2J"}
    line = json_line(json.dumps(value, ensure_ascii=False))
    assert json.loads(line) == value
    line.encode("utf-8")  # a lone surrogate is escaped, so the line can be written at all
    assert json_line('{"a": "ok"}') == '{"a": "ok"}'


def test_safe_text_and_console_clean_whatever_they_are_given() -> None:
    text = SafeText(PAYLOAD)
    text.append(PAYLOAD, style="bold")
    joined = SafeText.assemble(("x", "red"), PAYLOAD) + PAYLOAD
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="truecolor", width=120)
    table = _Table("cell")
    table.add_row(PAYLOAD)
    console.print(text, joined, PAYLOAD, table, f"[bold]{PAYLOAD}[/] :smile:")
    printed = out.getvalue()
    assert injected(printed, terminal=True) == []
    assert "␛[8m" in printed and "␛]52;" in printed, "shown, not silently dropped"
    assert "[bold]" in printed and ":smile:" in printed, "no markup, no emoji codes"


def test_no_cli_module_prints_around_the_sanitizer() -> None:
    wrong = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "_safe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in ("rich.text", "rich.markup"):
                wrong.append(f"{path.name}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Console":
                wrong.append(f"{path.name}:{node.lineno} builds a rich Console")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                wrong.append(f"{path.name}:{node.lineno} calls print()")
    assert not wrong, "\n".join(wrong)


def _poisoned() -> list[dict[str, Any]]:
    """A session where every string a server could send carries the payload."""
    p = PAYLOAD
    log = Log()
    log.session(title=f"title {p}")
    t, r, w = "trn_01", "run_root", "run_worker"
    log.turn(t, text=f"user {p}", client=f"cli_{p}")
    log.start(t)
    log.add("message.started", {"message_id": "msg_1", "role": "assistant"}, turn=t, run=r)
    log.add("reasoning.delta", {"message_id": "msg_1", "delta": f"why {p}"}, turn=t, run=r)
    log.add("message.delta", {"message_id": "msg_1", "delta": f"text {p}"}, turn=t, run=r)
    call = {"tool_call_id": "call_1", "name": f"shell{p}", "title": f"Run {p}", "kind": "execute"}
    log.add("tool_call.started", call | {"input": {"command": HIDDEN_COMMAND + p}}, turn=t, run=r)
    log.add(
        "input_request.opened",
        {
            "request_id": "req_1",
            "reason": "tool_call",
            "tool_call_id": "call_1",
            "prompt": f"Allow {p}?",
            "options": [{"option_id": f"ok{p}", "name": f"Allow {p}", "kind": "allow_once"}],
        },
        turn=t,
        run=r,
    )
    call2 = call | {"tool_call_id": "call_2", "input": {p: [p, {p: 1}]}}
    log.add("tool_call.started", call2, turn=t, run=r)
    update = {"tool_call_id": "call_2", "status": "failed", "output": f"out {p}"}
    log.add("tool_call.updated", update | {"error": {"code": p, "message": f"err {p}"}}, turn=t)
    entries = [{"id": "p1", "content": f"plan {p}", "status": "in_progress"}]
    log.add("plan.updated", {"entries": entries}, turn=t, run=r)
    worker = {"worker_run_id": w, "parent_run_id": r, "parent_tool_call_id": "call_2"}
    log.add("worker.started", worker | {"name": f"agent {p}", "task": f"task {p}"}, turn=t, run=r)
    log.add("plan.updated", {"entries": entries}, turn=t, run=w)
    artifact = {"artifact_id": f"art_{p}", "name": f"name {p}", "media_type": f"text/{p}"}
    artifact |= {"size": 3, "sha256": "0" * 64}
    log.add("artifact.published", artifact, turn=t, run=r)
    log.add("file.changed", {"path": f"path {p}", "change": "created"}, turn=t, run=r)
    usage = {"provider": f"prov {p}", "model": f"model {p}", "input_tokens": 3}
    log.add("usage.recorded", usage, turn=t, run=w)
    retry = {"attempt": 2, "retry_at": "2026-11-29T08:00:09Z", "error": {"code": p, "message": p}}
    log.add("turn.state", {"state": "running", "model_retry": retry}, turn=t)
    return log.actions


def _ended(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    log = Log()
    log.actions = [dict(a) for a in actions]
    log._seq = len(actions)
    by = {"client_id": f"cli_{PAYLOAD}", "principal_id": f"prn_{PAYLOAD}"}
    resolved = {"request_id": "req_1", "outcome": "answered", "payload": {PAYLOAD: PAYLOAD}}
    log.add("input_request.resolved", resolved | {"answered_by": by}, turn="trn_01")
    error = {"code": PAYLOAD, "message": f"failed {PAYLOAD}"}
    log.add("turn.ended", {"stop_reason": "failed", "error": error}, turn="trn_01")
    return log.actions


def _draw(*renderables: Any, terminal: bool) -> str:
    out = io.StringIO()
    colours = "truecolor" if terminal else "auto"  # "auto" finds no terminal: no styles
    console = SafeConsole(file=out, force_terminal=terminal, width=100, color_system=colours)
    console.print(*renderables)
    return out.getvalue()


def test_every_renderer_routes_remote_strings_through_the_sanitizer() -> None:
    for actions in (_poisoned(), _ended(_poisoned())):
        state = replay(action_from_dict(a) for a in actions)
        assert state["anomalies"] == []
        table = _Table("turn", "label!", "input!")
        for turn_id, label, amounts in usage_rows(state):
            table.add_row(turn_id, label, str(amounts["input_tokens"]))
        session = SimpleNamespace(local=LocalSession(state), client=SimpleNamespace(client_id="c"))
        for terminal in (False, True):
            console = SafeConsole(file=io.StringIO(), force_terminal=terminal)
            follower = Follower(session, console, console)  # type: ignore[arg-type]
            follower.turn_id = "trn_01"
            footer = follower._footer()
            asked = follower._asked_about(
                state["turns"][0], state["turns"][0]["input_requests"]["req_1"]
            )
            printed = _draw(
                render_session(state, reasoning=True),
                table,
                footer,
                Group(*asked),
                terminal=terminal,
            )
            assert injected(printed, terminal=terminal) == [], printed
            assert "␛[8m" in printed
            # The hidden command is there, whole, in the approval and in the timeline.
            assert "notes.md" + "·" * 50 in printed.replace("\n", "").replace(" ", "")
