from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from opennua.protocol.actions import (
    ACTION_CLASSES,
    ACTION_TYPES,
    MessageDeltaAction,
    UnknownAction,
    action_from_dict,
    action_from_json,
    action_to_dict,
    action_to_json,
)
from tests.conformance.regen import VECTOR_DIR


def _examples() -> dict[str, dict[str, object]]:
    """One example of every action type, taken from the conformance vectors."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted(VECTOR_DIR.glob("*.json")):
        for action in json.loads(path.read_text(encoding="utf-8"))["actions"]:
            found.setdefault(action["type"], action)
    return found


EXAMPLES = _examples()


@pytest.mark.parametrize("type_name", sorted(ACTION_TYPES))
def test_round_trip_every_type(type_name: str) -> None:
    raw = EXAMPLES[type_name]
    action = action_from_json(json.dumps(raw))
    assert isinstance(action, ACTION_CLASSES[type_name])
    again = action_from_json(action_to_json(action))
    assert again == action
    # Every field the example set survives the trip (defaults may add nulls, never drop).
    assert _contains(action_to_dict(again), raw)


def _contains(dumped: object, raw: object) -> bool:
    if isinstance(raw, dict):
        return isinstance(dumped, dict) and all(
            key in dumped and _contains(dumped[key], value) for key, value in raw.items()
        )
    if isinstance(raw, list):
        return (
            isinstance(dumped, list)
            and len(dumped) == len(raw)
            and all(_contains(d, r) for d, r in zip(dumped, raw, strict=True))
        )
    return dumped == raw


def test_unknown_fields_of_a_newer_producer_load() -> None:
    raw = dict(EXAMPLES["tool_call.updated"])
    raw["future_envelope_field"] = {"x": 1}
    raw["data"] = dict(raw["data"], progress=0.5)  # type: ignore[arg-type]
    action = action_from_dict(raw)
    assert action.type == "tool_call.updated"
    assert "progress" not in action_to_dict(action)["data"]


def test_an_unknown_type_loads_as_unknown_action() -> None:
    action = action_from_dict(
        {
            "v": 1,
            "session_id": "ses_1",
            "seq": 3,
            "id": "act_1",
            "type": "x.y",
            "ts": "2026-11-29T08:00:00Z",
            "data": {"a": [1]},
        }
    )
    assert isinstance(action, UnknownAction)
    assert action.data == {"a": [1]}


def _errors(raw: object) -> list[tuple[object, ...]]:
    with pytest.raises(ValidationError) as caught:
        if isinstance(raw, str):
            action_from_json(raw)
        else:
            action_from_dict(raw)  # type: ignore[arg-type]
    return [error["loc"] for error in caught.value.errors()]


def test_wrong_version_names_the_field() -> None:
    raw = dict(EXAMPLES["message.delta"], v=2)
    assert ("message.delta", "v") in _errors(raw)


def test_wrong_payload_shape_names_the_field() -> None:
    raw = dict(EXAMPLES["usage.recorded"])
    raw["data"] = dict(raw["data"], input_tokens="many")  # type: ignore[arg-type]
    assert ("usage.recorded", "data", "input_tokens") in _errors(raw)
    raw["data"] = {"provider": "p"}
    assert ("usage.recorded", "data", "model") in _errors(raw)


def test_negative_tokens_bad_timestamp_and_oversized_output_are_rejected() -> None:
    usage = dict(EXAMPLES["usage.recorded"])
    usage["data"] = dict(usage["data"], output_tokens=-1)  # type: ignore[arg-type]
    assert ("usage.recorded", "data", "output_tokens") in _errors(usage)
    assert ("message.delta", "ts") in _errors(dict(EXAMPLES["message.delta"], ts="yesterday"))
    big = dict(EXAMPLES["tool_call.updated"])
    big["data"] = dict(big["data"], output="x" * 8193)  # type: ignore[arg-type]
    assert ("tool_call.updated", "data", "output") in _errors(big)


def test_malformed_json_is_a_validation_error() -> None:
    assert _errors('{"v": 1, "type": ') != []


def test_actions_are_frozen() -> None:
    action = action_from_dict(EXAMPLES["message.delta"])
    assert isinstance(action, MessageDeltaAction)
    with pytest.raises(ValidationError):
        action.seq = 99
