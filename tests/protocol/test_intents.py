from __future__ import annotations

import pytest
from pydantic import ValidationError

from opennua.protocol.intents import (
    INTENT_ADAPTER,
    INTENT_RESULT_ADAPTER,
    AnswerInput,
    Conflict,
    SendMessage,
)

BASE = {"intent_id": "int_1", "client_id": "cli_1"}


def test_send_message_defaults_to_enqueue() -> None:
    intent = INTENT_ADAPTER.validate_python(
        {**BASE, "type": "send_message", "content": [{"type": "text", "text": "hi"}]}
    )
    assert isinstance(intent, SendMessage)
    assert intent.if_busy == "enqueue"


def test_send_message_needs_content_and_a_known_policy() -> None:
    with pytest.raises(ValidationError):
        INTENT_ADAPTER.validate_python({**BASE, "type": "send_message", "content": []})
    with pytest.raises(ValidationError) as caught:
        INTENT_ADAPTER.validate_python(
            {
                **BASE,
                "type": "send_message",
                "content": [{"type": "text", "text": "x"}],
                "if_busy": "later",
            }
        )
    assert caught.value.errors()[0]["loc"] == ("send_message", "if_busy")


def test_answer_needs_exactly_one_of_option_or_payload() -> None:
    assert isinstance(
        INTENT_ADAPTER.validate_python(
            {**BASE, "type": "answer_input", "request_id": "req_1", "option_id": "allow"}
        ),
        AnswerInput,
    )
    for extra in ({}, {"option_id": "allow", "payload": {"a": 1}}):
        with pytest.raises(ValidationError, match="exactly one"):
            INTENT_ADAPTER.validate_python(
                {**BASE, "type": "answer_input", "request_id": "req_1", **extra}
            )


def test_unknown_intent_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        INTENT_ADAPTER.validate_python({**BASE, "type": "format_disk"})


def test_conflict_carries_the_winning_resolution() -> None:
    result = INTENT_RESULT_ADAPTER.validate_json(
        '{"type":"conflict","intent_id":"int_2","code":"input_request_resolved",'
        '"resolution":{"option_id":"allow","answered_by":{"client_id":"cli_a"}}}'
    )
    assert isinstance(result, Conflict)
    assert result.resolution["option_id"] == "allow"
