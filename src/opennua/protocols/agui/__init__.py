"""AG-UI (frontends): `RunAgentInput` onto our intents, our log onto AG-UI events.

A client of the Session Host like the web UI, with no store of its own: every event a run
sends is derived from the session's folded state (docs/protocols.md, "AG-UI"). The
server's route (`POST /v1/agui/{deployment}`) does the I/O; this module is pure.
"""

from opennua.protocols.agui._input import (
    CLIENT_ID,
    InputError,
    check_ids,
    client_tools,
    content,
    message_key,
    request_turn,
    resume_intents,
    thread_key,
    tool_answer,
    turn_of_message,
    user_message,
)
from opennua.protocols.agui._patch import json_patch
from opennua.protocols.agui._run import RunStream
from opennua.protocols.agui._views import messages, shared_state

__all__ = [
    "CLIENT_ID",
    "InputError",
    "RunStream",
    "check_ids",
    "client_tools",
    "content",
    "json_patch",
    "message_key",
    "messages",
    "request_turn",
    "resume_intents",
    "shared_state",
    "thread_key",
    "tool_answer",
    "turn_of_message",
    "user_message",
]
