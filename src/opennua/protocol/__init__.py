"""The session protocol: ids, actions, state, the reducer and intents (docs/architecture.md §3).

Pure: no I/O, no clock, no randomness. The Host, the Python client, the CLI and (through
the conformance vectors) the web client all reduce actions with these rules.
"""

from opennua.protocol.actions import (
    ACTION_TYPES,
    Action,
    UnknownAction,
    action_from_dict,
    action_from_json,
    action_to_dict,
    action_to_json,
)
from opennua.protocol.envelope import envelope, timestamp
from opennua.protocol.ids import action_id, new_id
from opennua.protocol.intents import (
    Accepted,
    AnswerInput,
    Cancel,
    Conflict,
    CreateSession,
    Intent,
    IntentResult,
    Rejected,
    ReportDelivery,
    RetryTurn,
    SendMessage,
    UpdateSession,
)
from opennua.protocol.reducer import InvalidAction, SequenceGap, reduce, replay
from opennua.protocol.schema import json_schemas
from opennua.protocol.state import (
    SessionState,
    copy_state,
    initial_state,
    state_from_json,
    state_to_json,
)

__all__ = [
    "ACTION_TYPES",
    "Accepted",
    "Action",
    "AnswerInput",
    "Cancel",
    "Conflict",
    "CreateSession",
    "Intent",
    "IntentResult",
    "InvalidAction",
    "Rejected",
    "ReportDelivery",
    "RetryTurn",
    "SendMessage",
    "SequenceGap",
    "SessionState",
    "UnknownAction",
    "UpdateSession",
    "action_from_dict",
    "action_from_json",
    "action_id",
    "action_to_dict",
    "action_to_json",
    "copy_state",
    "envelope",
    "initial_state",
    "json_schemas",
    "new_id",
    "reduce",
    "replay",
    "state_from_json",
    "state_to_json",
    "timestamp",
]
