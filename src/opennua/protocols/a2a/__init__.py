"""A2A (agents calling agents) as a client of the Session Host (docs/protocols.md, "A2A").

Pure mapping, no I/O: a task is a turn's execution and `contextId` its session; what a
task shows is derived from the reduced session state (`task_of`, `TaskFollower`); what a
caller sends becomes our intents' fields (`content_of`, `answer_of`, `intent_key`); the
JSON-RPC envelope and its errors (`parse_call`, `error_body`); a deployment's card
(`agent_card`). The server's routes (`opennua.server._a2a`) do the I/O.

Built on the official SDK's types (`a2a-sdk`: protobuf messages); import this module
lazily, where a request needs it, so that a server start does not pay for them.
"""

from opennua.protocols.a2a._card import PROTOCOL_VERSION, Skill, agent_card
from opennua.protocols.a2a._inbound import (
    BadMessage,
    answer_of,
    content_of,
    intent_key,
    named_request,
)
from opennua.protocols.a2a._push import PUSH_EVENTS, PUSH_FORMAT, PushStep, push_config, push_step
from opennua.protocols.a2a._rpc import (
    METHODS,
    STREAMING,
    Call,
    RequestId,
    RpcError,
    error_body,
    parse_call,
    result_body,
)
from opennua.protocols.a2a._tasks import (
    TERMINAL,
    TaskFollower,
    find_turn,
    open_requests,
    task_of,
    task_state,
    with_answer,
)

__all__ = [
    "METHODS",
    "PROTOCOL_VERSION",
    "PUSH_EVENTS",
    "PUSH_FORMAT",
    "STREAMING",
    "TERMINAL",
    "BadMessage",
    "Call",
    "PushStep",
    "RequestId",
    "RpcError",
    "Skill",
    "TaskFollower",
    "agent_card",
    "answer_of",
    "content_of",
    "error_body",
    "find_turn",
    "intent_key",
    "named_request",
    "open_requests",
    "parse_call",
    "push_config",
    "push_step",
    "result_body",
    "task_of",
    "task_state",
    "with_answer",
]
