"""Runtime events → session actions. Pure: the time and the ids' producer are passed in."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opennua.protocol.actions import PROTOCOL_VERSION
from opennua.protocol.ids import action_id
from opennua.runtime import RuntimeEvent


def project(
    events: Iterable[RuntimeEvent],
    *,
    session_id: str,
    turn_id: str,
    execution_id: str,
    ts: str,
) -> list[dict[str, Any]]:
    """Envelopes (without seq) for `events`; the same event always gets the same action id."""
    return [
        {
            "v": PROTOCOL_VERSION,
            "session_id": session_id,
            "id": action_id(execution_id, event.key),
            "type": event.type,
            "ts": ts,
            "turn_id": turn_id,
            "run_id": event.run_id,
            "client_id": None,
            "intent_id": None,
            "data": event.data.model_dump(mode="json"),
        }
        for event in events
    ]
