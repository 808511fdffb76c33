"""Session state → Rich text. Pure: the same functions draw the live view, `attach` and
`show`, so live, reconnect and history look the same (they read the same timeline)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from opennua.protocol import Session
from opennua.protocol.state import TimelineItem, Turn, Usage, Worker

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUS_STYLE = {
    "pending": ("○", "dim"),
    "in_progress": ("◐", "cyan"),
    "completed": ("✓", "green"),
    "failed": ("✗", "red"),
    "cancelled": ("⊘", "yellow"),
    "unknown": ("?", "magenta"),
}
PLAN_MARK = {"pending": "☐", "in_progress": "◐", "completed": "☑"}
INDENT = "  "


def _short(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def brief_input(value: Any) -> str:
    """The one argument that says what a tool call does (a path, a command, a task)."""
    if isinstance(value, dict):
        for key in ("command", "path", "name", "query", "url", "task"):
            if isinstance(value.get(key), str):
                return _short(value[key], 70)
        if not value:
            return ""
    return _short(json.dumps(value, ensure_ascii=False, sort_keys=True), 70)


def usage_text(usage: Usage) -> str:
    return (
        f"in {usage['input_tokens']:,} (cache read {usage['cache_read_input_tokens']:,}, "
        f"cache write {usage['cache_creation_input_tokens']:,}) · "
        f"out {usage['output_tokens']:,} (reasoning {usage['reasoning_output_tokens']:,})"
    )


def worker_for_call(turn: Turn, tool_call_id: str) -> Worker | None:
    for worker in turn["workers"].values():
        if worker["parent_tool_call_id"] == tool_call_id:
            return worker
    return None


def is_final(turn: Turn, item: TimelineItem) -> bool:
    """Whether an item can no longer change (so it can be printed once, for good)."""
    kind, key = item["kind"], item["id"]
    if kind == "message":
        message = turn["messages"].get(key)
        thought = turn["reasoning"].get(key)
        return (message is None or message["status"] != "streaming") and (
            thought is None or thought["status"] != "streaming"
        )
    if kind == "reasoning":
        reasoning = turn["reasoning"].get(key)
        return reasoning is None or reasoning["status"] != "streaming"
    if kind == "tool_call":
        call = turn["tool_calls"].get(key)
        if call is None:
            return True
        worker = worker_for_call(turn, key)
        return call["status"] in TERMINAL and (worker is None or worker["status"] != "running")
    if kind == "input_request":
        request = turn["input_requests"].get(key)
        return request is None or request["status"] != "open"
    if kind == "worker":
        worker = turn["workers"].get(key)
        return worker is None or worker["status"] != "running"
    return True


def item_lines(
    state: Session, turn: Turn, item: TimelineItem, depth: int = 0, *, reasoning: bool = False
) -> list[Text]:
    """The lines of one timeline item; a sub-agent is drawn under its tool call."""
    pad = INDENT * depth
    kind, key = item["kind"], item["id"]
    if kind == "message":
        message = turn["messages"].get(key)
        if message is None:
            return []
        if message["role"] == "user":
            return [Text(f"{pad}› {message['text']}", style="bold")]
        # A response's reasoning is drawn with it, before its text, wherever the
        # reasoning's own timeline entry falls (it may start before or after the text).
        lines = _reasoning_lines(turn, key, pad, reasoning)
        if message["text"]:
            text_lines = [Text(f"{pad}{line}") for line in message["text"].splitlines() or [""]]
            if message["status"] == "streaming":
                text_lines[-1].append("▌", style="dim")
            lines += text_lines
        if message["status"] == "interrupted":
            lines.append(Text(f"{pad}(interrupted; the model call was re-issued)", style="dim"))
        return lines
    if kind == "reasoning":
        if key in turn["messages"]:
            return []  # drawn with its message
        return _reasoning_lines(turn, key, pad, reasoning)
    if kind == "tool_call":
        return _tool_call_lines(state, turn, key, depth, reasoning)
    if kind == "input_request":
        return _request_lines(turn, key, pad)
    if kind == "worker":
        worker = turn["workers"].get(key)
        if worker is None or worker["parent_tool_call_id"] in turn["tool_calls"]:
            return []  # drawn under its tool call
        return _worker_lines(state, turn, worker, depth, reasoning)
    if kind == "artifact":
        artifact = state["artifacts"].get(key)
        if artifact is None:
            return []
        return [
            Text(
                f"{pad}▣ artifact {artifact['name']} · {artifact['size']:,} B · "
                f"sha256 {artifact['sha256'][:12]} · {artifact['artifact_id']}",
                style="blue",
            )
        ]
    if kind == "file_change":
        change = turn["file_changes"].get(key)
        if change is None:
            return []
        return [Text(f"{pad}✎ {change['path']} {change['change']}", style="dim")]
    return [Text(f"{pad}({kind} {key})", style="dim")]


def _reasoning_lines(turn: Turn, message_id: str, pad: str, full: bool) -> list[Text]:
    thought = turn["reasoning"].get(message_id)
    if thought is None or not thought["text"]:
        return []
    text = thought["text"] if full else _short(thought["text"], 90)
    return [Text(f"{pad}∴ {text}", style="dim italic")]


def _tool_call_lines(
    state: Session, turn: Turn, call_id: str, depth: int, reasoning: bool
) -> list[Text]:
    call = turn["tool_calls"].get(call_id)
    if call is None:
        return []
    pad = INDENT * depth
    icon, style = STATUS_STYLE.get(call["status"], ("·", ""))
    line = Text(f"{pad}{icon} ", style=style)
    line.append(call["title"] or call["name"], style="bold")
    arg = "" if call["name"] == "plan" else brief_input(call["input"])
    if arg:
        line.append(f" {arg}")
    line.append(f"  [{call['status']}]", style=style or "dim")
    lines = [line]
    entries = call["input"].get("entries") if isinstance(call["input"], dict) else None
    if call["name"] == "plan" and isinstance(entries, list):
        lines += plan_lines(entries, depth + 2)
    elif call["error"] is not None:
        lines.append(Text(f"{pad}{INDENT}⎿ {_short(call['error']['message'])}", style="red"))
    elif call["output"]:
        lines.append(Text(f"{pad}{INDENT}⎿ {_short(call['output'])}", style="dim"))
    worker = worker_for_call(turn, call_id)
    if worker is not None:
        lines += _worker_lines(state, turn, worker, depth + 1, reasoning)
    return lines


def _worker_lines(
    state: Session, turn: Turn, worker: Worker, depth: int, reasoning: bool
) -> list[Text]:
    pad = INDENT * depth
    status_style = {"running": "cyan", "completed": "green"}.get(worker["status"], "red")
    head = Text(f"{pad}↳ sub-agent ", style="dim")
    head.append(worker["name"], style="bold")
    head.append(f" [{worker['status']}]", style=status_style)
    head.append(f" {worker['worker_run_id']}", style="dim")
    lines = [head]
    for item in worker["timeline"]:
        lines += item_lines(state, turn, item, depth + 1, reasoning=reasoning)
    return lines


def _request_lines(turn: Turn, request_id: str, pad: str) -> list[Text]:
    request = turn["input_requests"].get(request_id)
    if request is None:
        return []
    if request["status"] == "open":
        options = " / ".join(str(o.get("option_id")) for o in request["options"] or [])
        text = f"{pad}? {request['prompt']}" + (f"  [{options}]" if options else "")
        return [Text(text + f"  {request_id}", style="yellow")]
    by = request["answered_by"]
    who = (by and (by["client_id"] or by["principal_id"])) or "someone"
    if request["outcome"] == "selected":
        choice = request["option_id"]
    elif request["outcome"] == "answered":
        choice = json.dumps(request["payload"], ensure_ascii=False)
    else:
        return [Text(f"{pad}⊘ {request['prompt']} ({request['outcome']})", style="yellow")]
    return [Text(f"{pad}✓ {request['prompt']} → {choice} (answered by {who})", style="green")]


def plan_lines(entries: list[Any], depth: int) -> list[Text]:
    pad = INDENT * depth
    lines = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        status = str(entry.get("status", "pending"))
        style = {"completed": "green", "in_progress": "cyan"}.get(status, "")
        lines.append(Text(f"{pad}{PLAN_MARK.get(status, '·')} {entry.get('content', '')}", style))
    return lines


def turn_header(turn: Turn, *, with_state: bool = True) -> Text:
    head = Text(f"── turn {turn['turn_id']}", style="bold")
    if with_state:
        attempt = f" · attempt {len(turn['attempts'])}" if turn["attempts"] else ""
        head.append(f" [{turn['state']}]{attempt}", style="dim")
    if turn["retry_of"]:
        head.append(f" · retry of {turn['retry_of']}", style="dim")
    return head


def turn_footer(turn: Turn) -> list[Text]:
    """The end of a turn: how it stopped, and its usage (sub-agents included)."""
    reason = turn["stop_reason"] or turn["state"]
    style = "green" if reason == "end_turn" else "red"
    attempts = len(turn["attempts"])
    lines = [Text(f"■ {reason}", style=style)]
    lines[0].append(f" · {attempts} attempt{'s' if attempts != 1 else ''}", style="dim")
    if turn["error"]:
        lines[0].append(f": {turn['error']['code']}: {turn['error']['message']}", style="red")
    lines.append(Text(f"usage · {usage_text(turn['usage'])}", style="dim"))
    return lines


def current_step(turn: Turn) -> str:
    """What the turn is doing now, for the spinner."""
    if turn["state"] == "queued":
        return "queued"
    if turn["state"] == "requires_action":
        return "waiting for input"
    if turn["state"] == "ended":
        return f"ended ({turn['stop_reason']})"
    step = "working"
    for run, items in _runs(turn):
        for item in items:
            if item["kind"] == "tool_call":
                call = turn["tool_calls"].get(item["id"])
                if call and call["status"] in ("pending", "in_progress"):
                    step = f"{run}{call['title']} {brief_input(call['input'])}".strip()
            elif item["kind"] == "message":
                message = turn["messages"].get(item["id"])
                if message and message["status"] == "streaming":
                    step = f"{run}writing"
            elif item["kind"] == "reasoning":
                thought = turn["reasoning"].get(item["id"])
                if thought and thought["status"] == "streaming":
                    step = f"{run}thinking"
    return step


def _runs(turn: Turn) -> Iterator[tuple[str, list[TimelineItem]]]:
    yield "", turn["timeline"]
    for worker in turn["workers"].values():
        if worker["status"] == "running":
            yield f"{worker['name']}: ", worker["timeline"]


def render_turn(state: Session, turn: Turn, *, reasoning: bool = False) -> RenderableType:
    """A whole turn as `show` prints it."""
    lines: list[Text] = [turn_header(turn)]
    for item in turn["timeline"]:
        lines += item_lines(state, turn, item, 1, reasoning=reasoning)
    if turn["plan"]:
        lines.append(Text(f"{INDENT}plan", style="bold"))
        lines += plan_lines(list(turn["plan"]), 2)
    if turn["state"] == "ended":
        lines += [Text(INDENT) + line for line in turn_footer(turn)]
    return Group(*lines)


def render_session(state: Session, *, reasoning: bool = False) -> RenderableType:
    title = state["title"] or "(untitled)"
    head = Text(f"{state['session_id']} · {title}", style="bold")
    head.append(f"  [{state['status']}] seq {state['seq']}", style="dim")
    parts: list[RenderableType] = [head]
    for turn in state["turns"]:
        parts.append(render_turn(state, turn, reasoning=reasoning))
    if state["open_input_requests"]:
        for entry in state["open_input_requests"]:
            parts.append(
                Text(
                    f"waiting for input: nua answer {state['session_id']} "
                    f"{entry['request_id']} --option <id>",
                    style="yellow",
                )
            )
    parts.append(Text(f"session usage · {usage_text(state['usage'])}", style="dim"))
    return Group(*parts)


def usage_rows(state: Session) -> Iterator[tuple[str, str, Usage]]:
    """(turn, label, usage) rows: per model, per sub-agent, turn total, session total."""
    for turn in state["turns"]:
        for model, usage in sorted(turn["usage_by_model"].items()):
            yield turn["turn_id"], model, usage
        for worker in turn["workers"].values():
            yield turn["turn_id"], f"↳ {worker['name']} (sub-agent, included)", worker["usage"]
        yield turn["turn_id"], "turn total", turn["usage"]
    yield "", "session total", state["usage"]
