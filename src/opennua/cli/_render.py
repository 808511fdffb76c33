"""Session state → Rich text. Pure: the same functions draw the live view, `attach` and
`show`, so live, reconnect and history look the same (they read the same timeline).

Every string here comes from the server; it is only ever put into a `SafeText`, which
cleans it (see _safe.py). What a person approves is drawn in full with `visible()`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding

from opennua.protocol import SessionState
from opennua.protocol.state import (
    Delivery,
    FileChange,
    InputRequest,
    ModelRetry,
    TimelineItem,
    Turn,
    Usage,
    Worker,
    WorkspaceRestore,
)

from ._context import answerer
from ._safe import SafeText, visible

TERMINAL = frozenset({"completed", "failed", "cancelled", "rejected"})
STATUS_STYLE = {
    "pending": ("○", "dim"),
    "in_progress": ("◐", "cyan"),
    "completed": ("✓", "green"),
    "failed": ("✗", "red"),
    "cancelled": ("⊘", "yellow"),
    "rejected": ("⊗", "yellow"),
    "unknown": ("?", "magenta"),
}
PLAN_MARK = {"pending": "☐", "in_progress": "◐", "completed": "☑"}
INDENT = "  "


def _short(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


BRIEF_KEYS = ("command", "path", "name", "query", "url", "task")


def brief_input(value: Any) -> str:
    """The one argument that says what a tool call does (a path, a command, a task)."""
    if isinstance(value, dict):
        for key in BRIEF_KEYS:
            if isinstance(value.get(key), str):
                return _short(value[key], 70)
        if not value:
            return ""
    return _short(_json(value), 70)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def brief_is_whole(value: Any) -> bool:
    """Whether `brief_input` shows all of `value`, exactly: nothing cut, collapsed or hidden."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, whole),) = value.items()
        if key not in BRIEF_KEYS or not isinstance(whole, str):
            return False
    elif isinstance(value, dict) and not value:
        return True
    else:
        whole = _json(value)
    return brief_input(value) == whole and visible(whole) == whole


def input_lines(value: Any, depth: int) -> list[RenderableType]:
    """A tool call's whole input, for a person to decide on: every argument in full, wrapped
    to the screen, with whitespace and invisible characters shown (never cut)."""
    fields = value.items() if isinstance(value, dict) and value else [("input", value)]
    lines: list[RenderableType] = []
    for key, inner in fields:
        line = SafeText(f"{visible(key)}: ", style="bold", overflow="fold")
        line.append(visible(inner if isinstance(inner, str) else _json(inner)))
        lines.append(Padding(line, (0, 0, 0, len(INDENT) * depth)))
    return lines


def request_for_call(turn: Turn, tool_call_id: str) -> InputRequest | None:
    """The input request asked about a tool call (the open one first), if any."""
    found = None
    for request in turn["input_requests"].values():
        if request["tool_call_id"] == tool_call_id:
            if request["status"] == "open":
                return request
            found = request
    return found


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
    state: SessionState, turn: Turn, item: TimelineItem, depth: int = 0, *, reasoning: bool = False
) -> list[RenderableType]:
    """The lines of one timeline item; a sub-agent is drawn under its tool call."""
    pad = INDENT * depth
    kind, key = item["kind"], item["id"]
    if kind == "message":
        message = turn["messages"].get(key)
        if message is None:
            return []
        if message["role"] == "user":
            return [SafeText(f"{pad}› {message['text']}", style="bold")]
        # A response's reasoning is drawn with it, before its text, wherever the
        # reasoning's own timeline entry falls (it may start before or after the text).
        lines: list[RenderableType] = [*_reasoning_lines(turn, key, pad, reasoning)]
        if message["text"]:
            text_lines = [SafeText(f"{pad}{line}") for line in message["text"].splitlines() or [""]]
            if message["status"] == "streaming":
                text_lines[-1].append("▌", style="dim")
            lines += text_lines
        if message["status"] == "interrupted":
            # Either a new attempt re-issued the call (its answer follows) or the turn ended.
            lines.append(SafeText(f"{pad}(interrupted mid-answer)", style="dim"))
        return lines
    if kind == "reasoning":
        if key in turn["messages"]:
            return []  # drawn with its message
        return [*_reasoning_lines(turn, key, pad, reasoning)]
    if kind == "tool_call":
        return _tool_call_lines(state, turn, key, depth, reasoning)
    if kind == "input_request":
        return [*_request_lines(turn, key, pad)]
    if kind == "worker":
        worker = turn["workers"].get(key)
        if worker is None or worker["parent_tool_call_id"] in turn["tool_calls"]:
            return []  # drawn under its tool call
        return _worker_lines(state, turn, worker, depth, reasoning)
    if kind == "artifact":
        artifact = state["artifacts"].get(key)
        if artifact is None:
            return []
        line = (
            f"{pad}▣ artifact {artifact['name']} · {artifact['size']:,} B · "
            f"sha256 {artifact['sha256'][:12]} · {artifact['artifact_id']}"
        )
        # Apart from the turn's status: a completed turn may hold a failed upload.
        state_ = artifact.get("state", "published")
        if state_ == "published":
            return [SafeText(line, style="blue")]
        error = artifact.get("error")
        why = f": {error['message']}" if error else ""
        style = "red" if state_ == "failed" else "yellow"
        return [SafeText(f"{line} · upload {state_}{why}", style=style)]
    if kind == "file_change":
        change = turn["file_changes"].get(key)
        if change is None:
            return []
        return [*_change_lines(change, pad)]
    if kind == "workspace_restore":
        restore = turn["workspace_restores"].get(key)
        return [] if restore is None else [*_restore_lines(restore, pad)]
    if kind == "mcp_unavailable":
        found = turn.get("unavailable_servers", {}).get(key)
        if found is None:
            return []
        server, code = found["server"], found["code"]
        head = f"{pad}⚠ MCP server {server} unavailable ({code}); the turn goes on without it"
        cause = [SafeText(f"{pad}  {row}", style="yellow") for row in found["message"].splitlines()]
        return [SafeText(head, style="yellow"), *cause]
    return [SafeText(f"{pad}({kind} {key})", style="dim")]


#: Diff lines a timeline shows of one file change; the rest are counted (`nua diff`).
DIFF_LINES_SHOWN = 40
_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def _change_lines(change: FileChange, pad: str) -> list[SafeText]:
    """`✎ path change · size`, then its diff (bounded), or what a binary file is."""
    head = f"{pad}✎ {change['path']} {change['change']}"
    if change.get("size") is not None:
        head += f" · {change['size']:,} B"
    if change.get("binary"):
        head += f" · binary, sha256 {(change.get('sha256') or '')[:12]}"
    lines = [SafeText(head, style="dim")]
    diff = change.get("diff")
    if diff is None:
        if change.get("diff_ref"):
            lines.append(SafeText(f"{pad}  diff stored by reference: nua diff SID {change['id']}"))
        return lines
    rows = diff.splitlines()
    for row in rows[:DIFF_LINES_SHOWN]:
        style = next((s for prefix, s in _DIFF_STYLES if row.startswith(prefix)), "dim")
        lines.append(SafeText(f"{pad}  {row}", style=style))
    if len(rows) > DIFF_LINES_SHOWN:
        more = len(rows) - DIFF_LINES_SHOWN
        lines.append(SafeText(f"{pad}  … {more} more lines: nua diff SID {change['id']}"))
    return lines


def _restore_lines(restore: WorkspaceRestore, pad: str) -> list[SafeText]:
    """A resumed attempt's restored workspace, and loudly what it could not bring back."""
    where = f"manifest {restore['manifest'][:12]}" if restore["manifest"] else "no commit yet"
    files = restore["files"]
    head = f"{pad}⟲ attempt {restore['attempt']}: workspace restored ({files} files, {where})"
    lost = [*restore["lost_paths"]]
    if restore["lost_more"]:
        lost.append(f"… {restore['lost_more']} more")
    if not lost and not restore["lost_tool_call_ids"]:
        return [SafeText(head, style="dim")]
    lines = [SafeText(head, style="yellow")]
    if lost:
        lines.append(
            SafeText(f"{pad}  lost uncommitted changes: {', '.join(lost)}", style="yellow")
        )
    if restore["lost_tool_call_ids"]:
        calls = ", ".join(restore["lost_tool_call_ids"])
        lines.append(
            SafeText(
                f"{pad}  changes made by {calls} after the last commit are lost", style="yellow"
            )
        )
    return lines


def _reasoning_lines(turn: Turn, message_id: str, pad: str, full: bool) -> list[SafeText]:
    thought = turn["reasoning"].get(message_id)
    if thought is None or not thought["text"]:
        return []
    text = thought["text"] if full else _short(thought["text"], 90)
    return [SafeText(f"{pad}∴ {text}", style="dim italic")]


def _tool_call_lines(
    state: SessionState, turn: Turn, call_id: str, depth: int, reasoning: bool
) -> list[RenderableType]:
    call = turn["tool_calls"].get(call_id)
    if call is None:
        return []
    pad = INDENT * depth
    icon, style = STATUS_STYLE.get(call["status"], ("·", ""))
    line = SafeText(f"{pad}{icon} ", style=style)
    line.append(call["title"] or call["name"], style="bold")
    arg = "" if call["name"] == "plan" else brief_input(call["input"])
    if arg:
        line.append(f" {arg}")
    line.append(f"  [{call['status']}]", style=style or "dim")
    lines: list[RenderableType] = [line]
    # What a person is asked to approve (or approved) is never shown cut or collapsed.
    request = request_for_call(turn, call_id)
    if request is not None and (request["status"] == "open" or not brief_is_whole(call["input"])):
        lines += input_lines(call["input"], depth + 2)
    entries = call["input"].get("entries") if isinstance(call["input"], dict) else None
    if call["name"] == "plan" and isinstance(entries, list):
        lines += plan_lines(entries, depth + 2)
    elif call["error"] is not None:
        error_style = "yellow" if call["status"] == "rejected" else "red"
        message = _short(call["error"]["message"])
        lines.append(SafeText(f"{pad}{INDENT}⎿ {message}", style=error_style))
    elif call["output"]:
        lines.append(SafeText(f"{pad}{INDENT}⎿ {_short(call['output'])}", style="dim"))
    worker = worker_for_call(turn, call_id)
    if worker is not None:
        lines += _worker_lines(state, turn, worker, depth + 1, reasoning)
    return lines


def _worker_lines(
    state: SessionState, turn: Turn, worker: Worker, depth: int, reasoning: bool
) -> list[RenderableType]:
    pad = INDENT * depth
    status_style = {"running": "cyan", "completed": "green"}.get(worker["status"], "red")
    head = SafeText(f"{pad}↳ sub-agent ", style="dim")
    head.append(worker["name"], style="bold")
    head.append(f" [{worker['status']}]", style=status_style)
    head.append(f" {worker['worker_run_id']}", style="dim")
    lines: list[RenderableType] = [head]
    for item in worker["timeline"]:
        lines += item_lines(state, turn, item, depth + 1, reasoning=reasoning)
    return lines


def _request_lines(turn: Turn, request_id: str, pad: str) -> list[SafeText]:
    request = turn["input_requests"].get(request_id)
    if request is None:
        return []
    if request["status"] == "open":
        options = " / ".join(str(o.get("option_id")) for o in request["options"] or [])
        text = f"{pad}? {request['prompt']}" + (f"  [{options}]" if options else "")
        return [SafeText(text + f"  {request_id}", style="yellow")]
    by = request["answered_by"]
    who = answerer(by) if by else "someone"
    if request["outcome"] == "selected":
        choice = request["option_id"]
    elif request["outcome"] == "answered":
        choice = json.dumps(request["payload"], ensure_ascii=False)
    else:
        return [SafeText(f"{pad}⊘ {request['prompt']} ({request['outcome']})", style="yellow")]
    return [SafeText(f"{pad}✓ {request['prompt']} → {choice} (answered by {who})", style="green")]


def plan_lines(entries: list[Any], depth: int) -> list[SafeText]:
    pad = INDENT * depth
    lines = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        status = str(entry.get("status", "pending"))
        style = {"completed": "green", "in_progress": "cyan"}.get(status, "")
        lines.append(
            SafeText(f"{pad}{PLAN_MARK.get(status, '·')} {entry.get('content', '')}", style)
        )
    return lines


def turn_header(turn: Turn, *, with_state: bool = True) -> SafeText:
    head = SafeText(f"── turn {turn['turn_id']}", style="bold")
    if with_state:
        attempt = f" · attempt {len(turn['attempts'])}" if turn["attempts"] else ""
        head.append(f" [{turn['state']}]{attempt}", style="dim")
    if turn["retry_of"]:
        head.append(f" · retry of {turn['retry_of']}", style="dim")
    return head


def turn_footer(turn: Turn) -> list[SafeText]:
    """The end of a turn: how it stopped, and its usage (sub-agents included)."""
    reason = turn["stop_reason"] or turn["state"]
    style = "green" if reason == "end_turn" else "red"
    attempts = len(turn["attempts"])
    lines = [SafeText(f"■ {reason}", style=style)]
    lines[0].append(f" · {attempts} attempt{'s' if attempts != 1 else ''}", style="dim")
    if turn["error"]:
        lines[0].append(f": {turn['error']['code']}: {turn['error']['message']}", style="red")
    lines.append(SafeText(f"usage · {usage_text(turn['usage'])}", style="dim"))
    return [*result_lines(turn), *lines]


def result_lines(turn: Turn) -> list[SafeText]:
    """The structured result (`turn.output`, what the plugin's output schema accepted),
    pretty-printed whole: a business reader copies it as it is."""
    if turn["output"] is None:
        return []
    document = json.dumps(turn["output"], indent=2, ensure_ascii=False)
    return [
        SafeText("result", style="bold"),
        *(SafeText(f"{INDENT}{line}") for line in document.splitlines()),
    ]


_FRACTION = re.compile(r"(\.\d{6})\d+")


def _moment(ts: str) -> datetime | None:
    try:  # RFC 3339 as the protocol writes it; Python reads at most 6 fraction digits
        return datetime.fromisoformat(_FRACTION.sub(r"\1", ts))
    except ValueError:
        return None


def clock(ts: str) -> str:
    """HH:MM:SS of an RFC 3339 timestamp in this machine's time zone (else the text)."""
    moment = _moment(ts)
    return ts if moment is None else moment.astimezone().strftime("%H:%M:%S")


def model_retry_text(retry: ModelRetry, now: datetime | None = None) -> str:
    """ "retrying the model (attempt N) at HH:MM:SS — code: message", with a countdown when
    `now` is given."""
    text = f"retrying the model (attempt {retry['attempt']}) at {clock(retry['retry_at'])}"
    at = _moment(retry["retry_at"])
    if now is not None and at is not None and at.tzinfo is not None:
        left = max(0, math.ceil((at - now).total_seconds()))
        text += f", in {left} s" if left else ", now"
    error = retry["error"]
    return f"{text} — {error['code']}: {error['message']}"


def waiting_for_model(turn: Turn) -> str | None:
    """The run whose model was asked and has not answered yet ("" for the turn's own run,
    "<name>: " for a sub-agent), else None.

    A projection of state, not a fact of its own: a running turn whose newest item is an
    assistant message still streaming with no text yet, or that has nothing after its
    user message; a running sub-agent with no item yet or the same kind of message.
    """
    if turn["state"] != "running" or turn["model_retry"] is not None:
        return None
    for worker in turn["workers"].values():
        if worker["status"] == "running" and _asked(turn, worker["timeline"], worker=True):
            return f"{worker['name']}: "
    return "" if _asked(turn, turn["timeline"], worker=False) else None


def _asked(turn: Turn, timeline: list[TimelineItem], *, worker: bool) -> bool:
    if not timeline:
        return worker
    newest = timeline[-1]
    if newest["kind"] != "message":
        return False
    if not worker and len(timeline) == 1 and newest["id"] == turn["user_message_id"]:
        return True
    message = turn["messages"].get(newest["id"])
    return (
        message is not None
        and message["role"] == "assistant"
        and message["status"] == "streaming"
        and not message["text"]
    )


def current_step(turn: Turn, now: datetime | None = None) -> str:
    """What the turn is doing now, for the spinner (`now` adds a retry's countdown)."""
    if turn["state"] == "queued":
        return "queued"
    if turn["state"] == "requires_action":
        return "waiting for input"
    if turn["state"] == "ended":
        return f"ended ({turn['stop_reason']})"
    if turn["model_retry"] is not None:
        return model_retry_text(turn["model_retry"], now)
    run = waiting_for_model(turn)
    if run is not None:
        return f"{run}waiting for the model"
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


def activity_line(turn: Turn, now: datetime | None = None) -> SafeText | None:
    """A line for what an active turn waits on that no item shows: a model retry, or the
    model itself."""
    if turn["state"] == "ended":
        return None
    if turn["model_retry"] is not None:
        return SafeText(f"{INDENT}↻ {model_retry_text(turn['model_retry'], now)}", style="yellow")
    run = waiting_for_model(turn)
    if run is not None:
        return SafeText(f"{INDENT}… {run}waiting for the model", style="cyan")
    return None


def render_turn(state: SessionState, turn: Turn, *, reasoning: bool = False) -> RenderableType:
    """A whole turn as `show` prints it."""
    lines: list[RenderableType] = [turn_header(turn)]
    for item in turn["timeline"]:
        lines += item_lines(state, turn, item, 1, reasoning=reasoning)
    if (activity := activity_line(turn)) is not None:
        lines.append(activity)
    if turn["plan"]:
        lines.append(SafeText(f"{INDENT}plan", style="bold"))
        lines += plan_lines(list(turn["plan"]), 2)
    if turn["state"] == "ended":
        lines += [SafeText(INDENT) + line for line in turn_footer(turn)]
    return Group(*lines)


def render_session(state: SessionState, *, reasoning: bool = False) -> RenderableType:
    title = state["title"] or "(untitled)"
    head = SafeText(f"{state['session_id']} · {title}", style="bold")
    head.append(f"  [{state['status']}] seq {state['seq']}", style="dim")
    parts: list[RenderableType] = [head]
    snapshot = snapshot_text(state)
    if snapshot:
        parts.append(SafeText(snapshot, style="dim"))
    for turn in state["turns"]:
        parts.append(render_turn(state, turn, reasoning=reasoning))
    if state["open_input_requests"]:
        for entry in state["open_input_requests"]:
            parts.append(
                SafeText(
                    f"waiting for input: nua answer {state['session_id']} "
                    f"{entry['request_id']} --option <id>",
                    style="yellow",
                )
            )
    if state["deliveries"]:
        parts.append(SafeText("deliveries", style="bold"))
        parts += [delivery_line(d) for d in state["deliveries"].values()]
    parts.append(SafeText(f"session usage · {usage_text(state['usage'])}", style="dim"))
    return Group(*parts)


def snapshot_text(state: SessionState) -> str:
    """`name@version · deployment · model · snapshot abc123def456`: what the session runs."""
    plugin = state["plugin"]
    if not plugin:
        return ""
    parts = [f"{plugin['name']}@{plugin['version']}"]
    if state["deployment"]:
        parts.append(f"deployment {state['deployment']}")
    if state["model"]:
        parts.append(f"model {state['model']}")
    if state["snapshot_digest"]:
        parts.append(f"snapshot {short_digest(state['snapshot_digest'])}")
    return " · ".join(parts)


def short_digest(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]


_DELIVERY_STYLE = {"sent": "green", "delivered": "green", "failed": "red", "retrying": "yellow"}


def delivery_line(delivery: Delivery) -> SafeText:
    """One external delivery: what, where, its state, and how many tries it took."""
    what = delivery["kind"] or "delivery"
    line = SafeText(f"{INDENT}{delivery['channel']} {what} → {delivery['target']} ")
    line.append(delivery["status"], style=_DELIVERY_STYLE.get(delivery["status"], "cyan"))
    line.append(f" · {delivery['attempts']} attempt(s)", style="dim")
    if delivery["status"] == "retrying" and delivery["next_attempt_at"]:
        line.append(f" · next {delivery['next_attempt_at']}", style="dim")
    if delivery["error"] is not None and delivery["status"] != "sent":
        line.append(f" · {delivery['error']['message']}", style="red")
    return line


def usage_rows(state: SessionState) -> Iterator[tuple[str, str, Usage]]:
    """(turn, label, usage) rows: per model, per sub-agent, turn total, session total."""
    for turn in state["turns"]:
        for model, usage in sorted(turn["usage_by_model"].items()):
            yield turn["turn_id"], model, usage
        for worker in turn["workers"].values():
            yield turn["turn_id"], f"↳ {worker['name']} (sub-agent, included)", worker["usage"]
        yield turn["turn_id"], "turn total", turn["usage"]
    yield "", "session total", state["usage"]
