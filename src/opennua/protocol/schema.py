"""JSON Schema of the wire types: actions, state and intents (exported by `nua schema`)."""

from __future__ import annotations

from typing import Any

from opennua.protocol.actions import ACTION_ADAPTER
from opennua.protocol.intents import INTENT_ADAPTER, INTENT_RESULT_ADAPTER
from opennua.protocol.state import SESSION_ADAPTER

__all__ = [
    "SCHEMA_NAMES",
    "json_schemas",
]

SCHEMA_NAMES = ("action", "state", "intent", "intent_result")


def json_schemas() -> dict[str, dict[str, Any]]:
    """Each wire type's JSON Schema (draft 2020-12), by name."""
    return {
        "action": ACTION_ADAPTER.json_schema(),
        "state": SESSION_ADAPTER.json_schema(),
        "intent": INTENT_ADAPTER.json_schema(),
        "intent_result": INTENT_RESULT_ADAPTER.json_schema(),
    }
