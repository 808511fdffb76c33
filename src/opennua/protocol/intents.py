"""What clients ask of the Host, and what it answers (docs/architecture.md §3).

One input type per intent: the HTTP routes, the WebSocket and the CLI all build these, so
validation happens once. `intent_id` is the idempotency key: retransmitting an intent after
a timeout returns the original result instead of causing a second effect.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, JsonValue, TypeAdapter, model_validator

from opennua.protocol.actions import ContentPart, Count, ErrorInfo, Id, Timestamp, _Frozen

__all__ = [
    "INTENT_ADAPTER",
    "INTENT_RESULT_ADAPTER",
    "Accepted",
    "AnswerInput",
    "Cancel",
    "Conflict",
    "CreateSession",
    "Intent",
    "IntentResult",
    "Rejected",
    "ReportDelivery",
    "RetryTurn",
    "SendMessage",
    "UpdateSession",
]


class _Intent(_Frozen):
    intent_id: Id
    client_id: Id


class SendMessage(_Intent):
    type: Literal["send_message"] = "send_message"
    content: Annotated[list[ContentPart], Field(min_length=1, max_length=64)]
    if_busy: Literal["reject", "enqueue", "interrupt"] = "enqueue"


class Cancel(_Intent):
    type: Literal["cancel"] = "cancel"
    turn_id: Id | None = None


class AnswerInput(_Intent):
    type: Literal["answer_input"] = "answer_input"
    request_id: Id
    option_id: Id | None = None
    payload: JsonValue = None

    @model_validator(mode="after")
    def _one_answer(self) -> Self:
        if (self.option_id is None) == (self.payload is None):
            raise ValueError("give exactly one of option_id or payload")
        return self


class RetryTurn(_Intent):
    type: Literal["retry_turn"] = "retry_turn"
    turn_id: Id


class UpdateSession(_Intent):
    type: Literal["update_session"] = "update_session"
    title: Annotated[str, Field(min_length=1, max_length=200)]


class ReportDelivery(_Intent):
    """A bridge reports how an external delivery fared; the Host appends `delivery.updated`.

    The bridge is the one that talks to the platform, so it is the witness of delivery;
    the Host accepts the report into the session log so every client sees the same state.
    """

    type: Literal["report_delivery"] = "report_delivery"
    delivery_id: Id
    channel: Annotated[str, Field(min_length=1, max_length=64)]
    target: Annotated[str, Field(min_length=1, max_length=256)]
    kind: Annotated[str, Field(min_length=1, max_length=64)]
    status: Literal["pending", "sent", "retrying", "failed"]
    attempts: Count = 0
    event_id: Annotated[str, Field(max_length=256)] | None = None
    next_attempt_at: Timestamp | None = None
    error: ErrorInfo | None = None


class CreateSession(_Intent):
    """The intent that creates a session (no session exists yet to scope it)."""

    type: Literal["create_session"] = "create_session"
    title: str = Field(default="", max_length=200)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    #: The deployment whose execution snapshot the session is bound to (None: `default`).
    deployment: str | None = Field(default=None, max_length=64)


Intent = Annotated[
    SendMessage | Cancel | AnswerInput | RetryTurn | UpdateSession | ReportDelivery,
    Field(discriminator="type"),
]
INTENT_ADAPTER: TypeAdapter[Intent] = TypeAdapter(Intent)


class Accepted(_Frozen):
    type: Literal["accepted"] = "accepted"
    intent_id: Id
    ids: dict[str, str] = Field(default_factory=dict)


class Rejected(_Frozen):
    type: Literal["rejected"] = "rejected"
    intent_id: Id
    code: str
    message: str


class Conflict(_Frozen):
    """Someone else's intent won (e.g. another client answered first); here is what won."""

    type: Literal["conflict"] = "conflict"
    intent_id: Id
    code: str
    resolution: dict[str, JsonValue]


IntentResult = Annotated[Accepted | Rejected | Conflict, Field(discriminator="type")]
INTENT_RESULT_ADAPTER: TypeAdapter[IntentResult] = TypeAdapter(IntentResult)
