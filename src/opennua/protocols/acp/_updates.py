"""Our actions as ACP `session/update` notifications: a pure projection of the session log.

`Projection` turns one action (raw JSON, as the Host sent it) into the updates an editor
shows. It remembers only what the log already said and ACP needs to say it again: how much
of each message was streamed (a `message.completed` may carry more than its deltas), the
content of each tool call (ACP replaces a call's content collection on every update), and
which runs are sub-agents (ACP has none; their messages stay out of the editor's chat).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    PlanEntry,
    ResourceContentBlock,
    SessionInfoUpdate,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | SessionInfoUpdate
)
Block = TextContentBlock | ResourceContentBlock

#: Our tool call statuses ACP has no word for all end the call without success.
_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def content_blocks(parts: list[Mapping[str, Any]]) -> list[Block]:
    """Our content parts as ACP content blocks (a part of another type: its JSON as text)."""
    blocks: list[Block] = []
    for part in parts:
        if part.get("type") == "text":
            blocks.append(text_block(str(part.get("text", ""))))
        elif part.get("type") == "resource_link":
            blocks.append(
                ResourceContentBlock(
                    type="resource_link",
                    uri=str(part.get("uri", "")),
                    name=str(part.get("name", "")),
                    mime_type=part.get("media_type"),
                )
            )
    return blocks


def tool_status(status: str) -> str:
    return _STATUS.get(status, "failed")


class Projection:
    """The ACP updates of one session's actions, in log order.

    `base_url` makes artifact links absolute; `own_intents` are the intents this editor
    sent, whose echo (its own prompt as a user message) it already shows.
    """

    def __init__(self, base_url: str, own_intents: set[str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.own_intents = own_intents if own_intents is not None else set()
        self.workers: set[str] = set()
        self.streamed: dict[str, int] = {}
        self.thought: dict[str, int] = {}
        self.contents: dict[str, list[ContentToolCallContent]] = {}
        self.locations: dict[str, list[ToolCallLocation]] = {}

    def updates(self, action: Mapping[str, Any]) -> list[Update]:
        kind = action["type"]
        data: Mapping[str, Any] = action.get("data") or {}
        mid = str(data.get("message_id", ""))
        sub_agent = action.get("run_id") in self.workers
        if kind == "turn.started":
            if action.get("intent_id") in self.own_intents:
                return []
            return [
                UserMessageChunk(session_update="user_message_chunk", content=b, message_id=mid)
                for b in content_blocks(data.get("input") or [])
            ]
        if kind == "worker.started":
            self.workers.add(str(data["worker_run_id"]))
            return []
        if kind in ("message.delta", "message.completed", "message.added") and not sub_agent:
            return self._message(kind, data, mid)
        if kind in ("reasoning.delta", "reasoning.completed") and not sub_agent:
            text = self._new_text(self.thought, mid, kind, data)
            return [_thought(text, mid)] if text else []
        if kind.startswith("tool_call.") or kind == "file.changed":
            return self._tool(kind, data)
        if kind == "plan.updated" and not sub_agent:
            entries = [
                PlanEntry(content=e["content"], priority=e["priority"], status=e["status"])
                for e in data.get("entries") or []
            ]
            return [AgentPlanUpdate(session_update="plan", entries=entries)]
        if kind == "artifact.published":
            link = ResourceContentBlock(
                type="resource_link",
                uri=f"{self.base_url}/v1/artifacts/{data['artifact_id']}/content",
                name=str(data["name"]),
                mime_type=data.get("media_type"),
                size=data.get("size"),
            )
            return [AgentMessageChunk(session_update="agent_message_chunk", content=link)]
        if kind == "session.updated" and data.get("title") is not None:
            return [SessionInfoUpdate(session_update="session_info_update", title=data["title"])]
        return []

    def _message(self, kind: str, data: Mapping[str, Any], mid: str) -> list[Update]:
        if kind == "message.added":
            if data.get("role") != "assistant":
                return []
            return [_message(b, mid) for b in content_blocks(data.get("content") or [])]
        text = self._new_text(self.streamed, mid, kind, data)
        return [_message(text_block(text), mid)] if text else []

    @staticmethod
    def _new_text(seen: dict[str, int], mid: str, kind: str, data: Mapping[str, Any]) -> str:
        """A delta, or what a completion holds beyond the deltas already sent."""
        if kind.endswith(".delta"):
            delta = str(data.get("delta", ""))
            seen[mid] = seen.get(mid, 0) + len(delta)
            return delta
        text = str(data.get("text", ""))
        rest = text[seen.get(mid, 0) :]
        seen[mid] = len(text)
        return rest

    def _tool(self, kind: str, data: Mapping[str, Any]) -> list[Update]:
        call = data.get("tool_call_id")
        if not call:
            return []
        call = str(call)
        if kind == "tool_call.started":
            return [
                ToolCallStart(
                    session_update="tool_call",
                    tool_call_id=call,
                    title=str(data.get("title") or data.get("name") or call),
                    kind=data.get("kind") or "other",
                    status="pending",
                    raw_input=data.get("input"),
                )
            ]
        contents = self.contents.setdefault(call, [])
        status: str | None = None
        if kind == "file.changed":
            self.locations.setdefault(call, []).append(ToolCallLocation(path=str(data["path"])))
            diff = data.get("diff")
            note = f"```diff\n{diff}\n```" if diff else f"{data['change']} {data['path']}"
            contents.append(_content(note))
        elif kind == "tool_call.updated":
            status = tool_status(str(data["status"]))
            if data.get("output"):
                contents.append(_content(str(data["output"])))
            if data.get("error"):
                error = data["error"]
                contents.append(_content(f"{data['status']}: {error['code']}: {error['message']}"))
        else:
            return []
        return [self.tool_update(call, status=status)]

    def tool_update(self, call: str, *, status: str | None = None) -> ToolCallProgress:
        """The call's current content and locations, with a new status if one is given."""
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=call,
            status=status,
            content=list(self.contents.get(call, [])) or None,
            locations=list(self.locations.get(call, [])) or None,
        )

    def note(self, call: str, text: str) -> ToolCallProgress:
        """Add a line to a tool call's content (who answered its approval elsewhere)."""
        self.contents.setdefault(call, []).append(_content(text))
        return self.tool_update(call)

    def say(self, text: str) -> AgentMessageChunk:
        """A line of our own in the chat (where a question without a tool call is)."""
        return AgentMessageChunk(session_update="agent_message_chunk", content=text_block(text))


def _content(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=text_block(text))


def _message(block: Block, mid: str) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=block, message_id=mid)


def _thought(text: str, mid: str) -> AgentThoughtChunk:
    return AgentThoughtChunk(
        session_update="agent_thought_chunk", content=text_block(text), message_id=mid
    )
