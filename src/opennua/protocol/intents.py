"""What clients ask of the Host, and what it answers (docs/architecture.md §3).

One input type per intent: the HTTP routes, the WebSocket and the CLI all build these, so
validation happens once. What a client gives of each intent is a `…Fields` model that the
intent and the server's HTTP body both inherit: one set of rules, whatever the door.
`intent_id` is the idempotency key: retransmitting an intent after a timeout returns the
original result instead of causing a second effect.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, JsonValue, TypeAdapter, model_validator

from opennua.protocol.actions import (
    ClientTools,
    ContentPart,
    Count,
    ErrorInfo,
    Id,
    Timestamp,
    _Frozen,
    _tag,
)

__all__ = [
    "INTENT_ADAPTER",
    "INTENT_RESULT_ADAPTER",
    "NAME_PATTERN",
    "Accepted",
    "AnswerFields",
    "AnswerInput",
    "Cancel",
    "CancelFields",
    "Conflict",
    "Content",
    "CreateSession",
    "CreateSessionFields",
    "DeliveryFields",
    "Intent",
    "IntentResult",
    "Rejected",
    "ReportDelivery",
    "RetryTurn",
    "SendMessage",
    "SendMessageFields",
    "UpdateSession",
    "UpdateSessionFields",
]

#: The name of a deployment, a plugin in the registry or a channel: lower case letters,
#: digits, `.`, `_` and `-`, starting with a letter or a digit, 64 at most.
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"

#: A message's content: 1 to 64 parts.
Content = Annotated[list[ContentPart], Field(min_length=1, max_length=64)]


class _Intent(_Frozen):
    intent_id: Id
    """Chosen by the client, unique per intent: the idempotency key (a retransmission
    returns the first result)."""
    client_id: Id
    """The client sending it (`cli_…`), kept across its reconnects."""


class SendMessageFields(_Frozen):
    content: Content
    """The message's content parts, in order."""
    if_busy: Literal["reject", "enqueue", "interrupt"] = "enqueue"
    """When a turn is running: refuse (409), queue the message after it, or cancel it."""
    client_tools: ClientTools = Field(default_factory=list)
    """Tools the client runs itself, offered to the model for this turn beside the
    agent's own (at most 32; a name the agent's tools use is refused). A call to one
    waits as an input request; the client answers it with the tool's result."""


class SendMessage(SendMessageFields, _Intent):
    """Send the agent a message: a new turn, now or after the running one."""

    type: Literal["send_message"] = _tag("send_message")


class CancelFields(_Frozen):
    turn_id: Id | None = None
    """The turn to cancel; null: the running one."""


class Cancel(CancelFields, _Intent):
    """Cancel a turn."""

    type: Literal["cancel"] = _tag("cancel")


#: "Exactly one of `option_id` or `payload`", as JSON Schema says it (a null payload is
#: no answer); `AnswerFields._one_answer` checks it.
_ONE_ANSWER: dict[str, JsonValue] = {
    "oneOf": [
        {
            "required": ["option_id"],
            "properties": {
                "option_id": {"not": {"type": "null"}, "description": "the option chosen"},
                "payload": {"type": "null", "description": "none beside an option"},
            },
        },
        {
            "required": ["payload"],
            "properties": {
                "option_id": {"type": "null", "description": "none beside a payload"},
                "payload": {"not": {"type": "null"}, "description": "the answer given"},
            },
        },
    ]
}


class AnswerFields(_Frozen):
    model_config = ConfigDict(json_schema_extra=_ONE_ANSWER)
    option_id: Id | None = None
    """The option selected (exactly one of this and `payload`)."""
    payload: JsonValue = None
    """A free-form answer, checked against the request's `response_schema`."""
    on_behalf_of: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    """The person this client answers for, as the client knows them (a chat bridge: the
    chat user); recorded in `answered_by` beside the principal, grants nothing."""

    @model_validator(mode="after")
    def _one_answer(self) -> Self:
        if (self.option_id is None) == (self.payload is None):
            raise ValueError("give exactly one of option_id or payload")
        return self


class AnswerInput(AnswerFields, _Intent):
    """Answer an open input request: select one of its options or give a payload."""

    type: Literal["answer_input"] = _tag("answer_input")
    request_id: Id
    """The request answered."""


class RetryTurn(_Intent):
    """Run an ended turn's input again, as a new execution naming the old one."""

    type: Literal["retry_turn"] = _tag("retry_turn")
    turn_id: Id
    """The turn to retry."""


class UpdateSessionFields(_Frozen):
    title: Annotated[str, Field(min_length=1, max_length=200)]
    """The new title."""


class UpdateSession(UpdateSessionFields, _Intent):
    """Rename the session."""

    type: Literal["update_session"] = _tag("update_session")


class DeliveryFields(_Frozen):
    channel: Annotated[str, Field(min_length=1, max_length=64)]
    """The platform it goes to (`matrix`)."""
    target: Annotated[str, Field(min_length=1, max_length=256)]
    """Where on that platform (a room id)."""
    kind: Annotated[str, Field(min_length=1, max_length=64)]
    """What is delivered: message, edit, reaction, upload."""
    status: Literal["pending", "sent", "retrying", "failed"]
    """Its state now; `sent` and `failed` are final (a later report is refused)."""
    attempts: Count = 0
    """How many times it was tried so far."""
    event_id: Annotated[str, Field(max_length=256)] | None = None
    """The platform's id of what it delivered, once sent."""
    next_attempt_at: Timestamp | None = None
    """When a `retrying` delivery is tried again."""
    error: ErrorInfo | None = None
    """The last error, if any."""


class ReportDelivery(DeliveryFields, _Intent):
    """A bridge reports how an external delivery fared; the Host appends `delivery.updated`.

    The bridge is the one that talks to the platform, so it is the witness of delivery;
    the Host accepts the report into the session log so every client sees the same state.
    """

    type: Literal["report_delivery"] = _tag("report_delivery")
    delivery_id: Id
    """The delivery's own id, kept across its retries."""


class CreateSessionFields(_Frozen):
    title: str = Field(default="", max_length=200)
    """The session's title."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form JSON to attach; the protocol does not read it."""
    deployment: str | None = Field(default=None, pattern=NAME_PATTERN)
    """The deployment whose execution snapshot the session is bound to (None: `default`)."""


class CreateSession(CreateSessionFields, _Intent):
    """The intent that creates a session (no session exists yet to scope it)."""

    type: Literal["create_session"] = _tag("create_session")


Intent = Annotated[
    SendMessage | Cancel | AnswerInput | RetryTurn | UpdateSession | ReportDelivery,
    Field(discriminator="type"),
]
INTENT_ADAPTER: TypeAdapter[Intent] = TypeAdapter(Intent)


class Accepted(_Frozen):
    """The Host accepted the intent; its actions are (or will be) in the log."""

    type: Literal["accepted"] = _tag("accepted")
    intent_id: Id
    """The intent answered."""
    ids: dict[str, str] = Field(default_factory=dict)
    """Ids of what it created, by name (`session_id`, `turn_id`, `execution_id`, …)."""
    resolution: dict[str, JsonValue] | None = Field(default=None, exclude_if=lambda v: v is None)
    """An accepted `answer_input`: the resolution it recorded (what a losing answer's
    `conflict` carries); absent for every other intent."""


class Rejected(_Frozen):
    """The Host refused the intent; nothing changed."""

    type: Literal["rejected"] = _tag("rejected")
    intent_id: Id
    """The intent answered."""
    code: str
    """Why, as a stable code (`session_busy`, `not_found`, …)."""
    message: str
    """Why, for a person."""


class Conflict(_Frozen):
    """Someone else's intent won (e.g. another client answered first); here is what won."""

    type: Literal["conflict"] = _tag("conflict")
    intent_id: Id
    """The intent answered."""
    code: str
    """What it lost to, as a stable code (`input_request_resolved`: answered already)."""
    resolution: dict[str, JsonValue]
    """What won (for an answer: the winning outcome and `answered_by`)."""


IntentResult = Annotated[Accepted | Rejected | Conflict, Field(discriminator="type")]
INTENT_RESULT_ADAPTER: TypeAdapter[IntentResult] = TypeAdapter(IntentResult)
