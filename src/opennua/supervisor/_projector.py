"""Runtime events → session actions. Pure: the time and the ids' producer are passed in."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opennua.protocol import action_id, envelope
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
        envelope(
            session_id,
            action_id(execution_id, event.key),
            event.type,
            ts,
            event.data.model_dump(mode="json"),
            turn_id=turn_id,
            run_id=event.run_id,
        )
        for event in events
    ]
