"""`RunAgentInput` onto our intents. Pure: ids derive from what the client sent.

- A thread the client names by one of our session ids is that session; any other thread
  id is mapped to a session through the idempotency key of the `create_session` intent
  (`thread_key`): the same thread id in the same workspace and deployment always lands on
  the same session, with no table of our own.
- The run's new input is the last message when it is a user message we have not seen:
  `send_message` keyed by its id (`message_key`), so a run the client re-sends (after a
  lost connection, a server restart) joins the turn the first one started.
- `resume` answers the interrupts of the last run: `answer_input` per entry (a payload
  `{"option_id": …}` selects that option, any other payload is the answer); a cancelled
  entry cancels the turn.
- `tools` (frontend tools) go with the new message as its `client_tools`; a call of one
  waits as an input request. A run whose last message is a `ToolMessage` answers the
  request of that call with its content (`tool_answer`), keyed by the run and the call.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ag_ui.core import ResumeEntry, RunAgentInput, ToolMessage, UserMessage
from pydantic import TypeAdapter, ValidationError

from opennua.protocol import AnswerInput, Cancel, SessionState
from opennua.protocol.actions import (
    ClientTool,
    ClientTools,
    ContentPart,
    ResourceLinkPart,
    TextPart,
)

from ._views import client_call, result_id

_CLIENT_TOOLS: TypeAdapter[list[ClientTool]] = TypeAdapter(ClientTools)

#: The client id our intents from AG-UI carry (AG-UI has no client identity of its own).
CLIENT_ID = "agui"
#: Longest thread or run id taken (they are echoed in every run's first and last event).
MAX_ID = 256


class InputError(ValueError):
    """The input cannot be mapped onto our intents (a 422)."""

    def __init__(self, loc: list[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def check_ids(run: RunAgentInput) -> None:
    for name, value in (("threadId", run.thread_id), ("runId", run.run_id)):
        if not value or len(value) > MAX_ID:
            raise InputError(["body", name], f"{name} must be 1 to {MAX_ID} characters")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def thread_key(workspace_id: str | None, deployment: str, thread_id: str) -> str:
    """The `create_session` key a foreign thread id maps to."""
    return f"agui_thread_{_digest(workspace_id or '', deployment, thread_id)}"


def message_key(session_id: str, message_id: str) -> str:
    """The `send_message` key of a user message the client sent."""
    return f"agui_msg_{_digest(session_id, message_id)}"


def user_message(run: RunAgentInput, state: SessionState) -> UserMessage | None:
    """The run's new user message: the last message, when it is the user's and is not one
    of ours (a snapshot gave the client our ids for messages we already hold)."""
    if not run.messages:
        return None
    last = run.messages[-1]
    if not isinstance(last, UserMessage):
        return None
    if any(turn["user_message_id"] == last.id for turn in state["turns"]):
        return None
    return last


def turn_of_message(state: SessionState, message_id: str) -> str | None:
    """The turn whose user message the client names by our id, if any."""
    for turn in state["turns"]:
        if turn["user_message_id"] == message_id:
            return turn["turn_id"]
    return None


def content(message: UserMessage, index: int) -> list[ContentPart]:
    """Our content parts for an AG-UI user message: text as text, a media part that
    points at a URL as a resource link; inline bytes are refused (upload them first)."""
    where: list[str | int] = ["body", "messages", index, "content"]
    if isinstance(message.content, str):
        if not message.content:
            raise InputError(where, "the message is empty")
        return [TextPart(text=message.content)]
    parts: list[ContentPart] = []
    for i, part in enumerate(message.content):
        if part.type == "text":
            parts.append(TextPart(text=part.text))
            continue
        source = part.source
        if source.type != "url":
            raise InputError([*where, i], f"a {part.type} part must point at a URL")
        name = part.id or source.value.rsplit("/", 1)[-1] or part.type
        parts.append(ResourceLinkPart(uri=source.value, name=name, media_type=source.mime_type))
    if not parts or not 1 <= len(parts) <= 64:
        raise InputError(where, "a message has 1 to 64 parts")
    return parts


def client_tools(run: RunAgentInput) -> list[ClientTool]:
    """The run's frontend tools as our client tools (name, description, parameters), with
    our bounds: at most 32, names as models take them, each 16 KiB of JSON at most."""
    raw = [
        {"name": t.name, "description": t.description, "parameters": t.parameters or {}}
        for t in run.tools or []
    ]
    try:
        return _CLIENT_TOOLS.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise InputError(["body", "tools", *first["loc"]], first["msg"]) from exc


def tool_answer(session_id: str, run: RunAgentInput, state: SessionState) -> AnswerInput | None:
    """The answer a run whose last message is a `ToolMessage` gives: its content is the
    result of the client tool call it names, keyed by the run and the call (the same run
    sent again is one answer; another client's is another, and the first one wins). None
    when the last message is no tool message, or one of ours (a snapshot's tool result);
    `InputError` when it names no call of a client tool in this thread."""
    if not run.messages or not isinstance(run.messages[-1], ToolMessage):
        return None
    message = run.messages[-1]
    if message.id == result_id(message.tool_call_id):
        return None  # our own tool's result, as a snapshot gave it: a reconnect
    where: list[str | int] = ["body", "messages", len(run.messages) - 1, "toolCallId"]
    for turn in state["turns"]:
        for request in turn["input_requests"].values():
            if request["tool_call_id"] == message.tool_call_id and client_call(turn, request):
                key = f"agui_tool_{_digest(session_id, run.run_id, message.tool_call_id)}"
                return AnswerInput(
                    intent_id=key,
                    client_id=CLIENT_ID,
                    request_id=request["request_id"],
                    payload=message.content,
                )
    raise InputError(where, f"no call {message.tool_call_id} of a client tool in this thread")


def resume_intents(
    session_id: str, run_id: str, state: SessionState, entries: list[ResumeEntry]
) -> list[AnswerInput | Cancel]:
    """The intents that answer `entries`, keyed by the run and the interrupt: the same run
    sent twice is one answer, two clients' runs are two answers (the first one wins)."""
    out: list[AnswerInput | Cancel] = []
    for i, entry in enumerate(entries):
        where: list[str | int] = ["body", "resume", i]
        key = f"agui_resume_{_digest(session_id, run_id, entry.interrupt_id)}"
        if entry.status == "cancelled":
            turn_id = request_turn(state, entry.interrupt_id)
            if turn_id is None:  # never "the running turn": that may be someone else's
                raise InputError([*where, "interruptId"], "no such interrupt in this thread")
            out.append(Cancel(intent_id=key, client_id=CLIENT_ID, turn_id=turn_id))
            continue
        answer: dict[str, Any] = {"payload": entry.payload}
        payload = entry.payload
        if isinstance(payload, dict) and set(payload) == {"option_id"}:
            answer = {"option_id": payload["option_id"]}
        try:
            intent = AnswerInput(
                intent_id=key, client_id=CLIENT_ID, request_id=entry.interrupt_id, **answer
            )
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise InputError([*where, *first["loc"]], first["msg"]) from exc
        out.append(intent)
    return out


def request_turn(state: SessionState, request_id: str) -> str | None:
    """The turn an input request belongs to."""
    for turn in state["turns"]:
        if request_id in turn["input_requests"]:
            return turn["turn_id"]
    return None
