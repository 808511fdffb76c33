"""What the bridge posts, as Matrix message content: the progress card, input requests,
their resolutions, artifacts and replies. Pure functions of the session state.

Every message carries a plain `body` (what notifications and old clients show) and an
HTML `formatted_body`; text that came from the agent or a person is escaped.
"""

from __future__ import annotations

import html
from typing import Any

from opennua.protocol.state import Artifact, InputRequest, Turn

#: The tail of the streamed answer a card shows; a chat message is not a document.
TEXT_TAIL = 3000

_MARK = {
    "pending": "○",
    "in_progress": "◐",
    "completed": "✅",
    "failed": "❌",
    "cancelled": "⊘",
    "unknown": "❓",
    "running": "◐",
}

#: Reactions a person can tap on a request message, and the option kinds they choose.
REACTIONS = {"✅": ("allow_once", "allow_always"), "❌": ("reject_once", "reject_always")}


def _headline(turn: Turn) -> str:
    if turn["state"] == "ended":
        reason = turn["stop_reason"] or "ended"
        if reason == "end_turn":
            return "✅ Done"
        error = turn["error"]
        return f"❌ {reason}" + (f": {error['message']}" if error else "")
    if turn["state"] == "requires_action":
        return "✋ Waiting for your answer"
    if turn["state"] == "queued":
        return "⏳ Queued"
    return "◐ Working…"


def _in_order(turn: Turn, kind: str, items: dict[str, Any]) -> list[Any]:
    """`items` in the timeline's order (a worker's own items after its card), not the
    dict's: a state loaded from a snapshot has its keys sorted, a live one in arrival
    order, and the room must read the same either way."""
    ids: list[str] = []

    def walk(timeline: list[Any]) -> None:
        for ref in timeline:
            if ref["kind"] == kind:
                ids.append(ref["id"])
            if ref["kind"] == "worker" and ref["id"] in turn["workers"]:
                walk(turn["workers"][ref["id"]]["timeline"])

    walk(turn["timeline"])
    ids += [key for key in items if key not in ids]
    return [items[key] for key in dict.fromkeys(ids) if key in items]


def card(turn: Turn) -> tuple[str, str]:
    """The progress card of a turn: headline, plan, tool calls, sub-agents, the streamed
    answer's tail and, once the turn ended, its usage. (body, formatted_body)."""
    lines: list[tuple[str, str]] = [(_headline(turn), "b")]
    if turn["plan"]:
        lines.append(("Plan", "i"))
        lines += [(f"{_MARK.get(e['status'], '·')} {e['content']}", "") for e in turn["plan"]]
    calls = _in_order(turn, "tool_call", dict(turn["tool_calls"]))
    if calls:
        lines.append(("Tools", "i"))
        for call in calls[-12:]:
            title = call["title"] or call["name"]
            lines.append((f"{_MARK.get(call['status'], '·')} {title}", ""))
        if len(calls) > 12:
            lines.append((f"… and {len(calls) - 12} earlier", ""))
    if turn["workers"]:
        lines.append(("Sub-agents", "i"))
        for worker in _in_order(turn, "worker", dict(turn["workers"])):
            summary = f" — {worker['summary']}" if worker["summary"] else ""
            lines.append((f"{_MARK.get(worker['status'], '·')} {worker['name']}{summary}", ""))
    text = "\n\n".join(
        m["text"]
        for m in _in_order(turn, "message", dict(turn["messages"]))
        if m["role"] == "assistant" and m["text"]
    )
    if text:
        lines.append((text if len(text) <= TEXT_TAIL else "…" + text[-TEXT_TAIL:], "p"))
    if turn["state"] == "ended":
        u = turn["usage"]
        lines.append((f"Usage: {u['input_tokens']} in · {u['output_tokens']} out tokens", "i"))
    body = "\n".join(line for line, _ in lines)
    return body, "<br>".join(_html(line, tag) for line, tag in lines)


def _html(line: str, tag: str) -> str:
    text = html.escape(line).replace("\n", "<br>")
    return f"<{tag}>{text}</{tag}>" if tag else text


def options_of(request: InputRequest) -> list[dict[str, Any]]:
    return [dict(o) for o in request["options"] or []]


def request_message(request: InputRequest) -> tuple[str, str]:
    """An input request as its own message: the prompt and how to answer it."""
    lines = [f"✋ {request['prompt']}"]
    options = options_of(request)
    for number, option in enumerate(options, 1):
        lines.append(f"{number}. {option['name']} ({option['option_id']})")
    if options:
        lines.append("Reply with a number or an option id, or react ✅ / ❌.")
    else:
        lines.append("Reply to this message with your answer.")
    body = "\n".join(lines)
    return body, "<br>".join(html.escape(line) for line in lines)


def resolution_message(request: InputRequest, who: str) -> tuple[str, str]:
    """The request message once answered: who answered, and with what."""
    chosen = request["option_id"]
    names = {o["option_id"]: o["name"] for o in options_of(request)}
    if request["outcome"] == "selected" and chosen is not None:
        what = f"{names.get(chosen, chosen)} ({chosen})"
    elif request["outcome"] == "answered":
        what = repr(request["payload"])
    else:
        what = request["outcome"] or "closed"
    body = f"✋ {request['prompt']}\n☑ Answered by {who}: {what}"
    return body, "<br>".join(html.escape(line) for line in body.split("\n"))


def artifact_message(artifact: Artifact) -> str:
    return f"📎 {artifact['name']} ({artifact['size']} bytes) sha256:{artifact['sha256']}"


def text_content(body: str, formatted: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.notice", "body": body}
    if formatted is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = formatted
    return content


def edit_content(event_id: str, body: str, formatted: str) -> dict[str, Any]:
    """An `m.replace` edit of `event_id` (the fallback body says it is an edit)."""
    new = text_content(body, formatted)
    return {
        **text_content("* " + body, "* " + formatted),
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


def reply_content(event_id: str, body: str) -> dict[str, Any]:
    return {**text_content(body), "m.relates_to": {"m.in_reply_to": {"event_id": event_id}}}


def reaction_content(event_id: str, key: str) -> dict[str, Any]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
