"""The HTTP bodies of intents are the protocol's intents (issue 31): the same fields with
the same rules, so the two cannot drift apart again."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from opennua.protocol import (
    AnswerInput,
    Cancel,
    CreateSession,
    ReportDelivery,
    RetryTurn,
    SendMessage,
    UpdateSession,
)
from opennua.server._edge import (
    AnswerBody,
    CancelBody,
    CreateSessionBody,
    DeliveryBody,
    MessageBody,
    RetryBody,
    UpdateSessionBody,
)

#: body, its intent, and what the route's path gives instead of the body
BODIES: list[tuple[type[BaseModel], type[BaseModel], set[str]]] = [
    (CreateSessionBody, CreateSession, set()),
    (UpdateSessionBody, UpdateSession, set()),
    (MessageBody, SendMessage, set()),
    (CancelBody, Cancel, set()),
    (AnswerBody, AnswerInput, {"request_id"}),
    (RetryBody, RetryTurn, {"turn_id"}),
    (DeliveryBody, ReportDelivery, {"delivery_id"}),
]


@pytest.mark.parametrize(("body", "intent", "path"), BODIES)
def test_a_body_has_its_intents_fields_with_the_intents_rules(
    body: type[BaseModel], intent: type[BaseModel], path: set[str]
) -> None:
    assert body.model_config.get("extra") == "forbid"  # a misspelt field is an error
    given = set(intent.model_fields) - {"type", "intent_id", "client_id"} - path
    assert set(body.model_fields) - {"intent_id", "client_id"} == given
    for name in given:
        theirs, ours = intent.model_fields[name], body.model_fields[name]
        if (body, name) == (MessageBody, "content"):
            # The body also takes a bare string as one text part; the bounds are the intent's.
            assert all(rule in ours.metadata for rule in theirs.metadata)
            continue
        assert repr(ours) == repr(theirs), name


def test_the_deployment_name_is_checked_by_the_intent_itself() -> None:
    """It was the HTTP body's rule alone: a WebSocket or in-process caller got past it."""
    with pytest.raises(ValidationError, match="deployment"):
        CreateSession(intent_id="int_1", client_id="cli_1", deployment="Not A Name")
    assert CreateSession(intent_id="int_1", client_id="cli_1", deployment="team.v2-b")
