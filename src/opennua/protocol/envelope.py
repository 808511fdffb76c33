"""How an action is written before the Host appends it: its envelope as a plain dict, and
its timestamp (docs/architecture.md §3, "Action envelope").

Pure: the producer passes in the time, the id and the payload. Every producer (the Host's
intents, the supervisor's projector and journal, revocations, artifact retries) builds its
actions here, so the envelope has one shape and one version.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from opennua.protocol.actions import PROTOCOL_VERSION

__all__ = ["envelope", "timestamp"]


def envelope(
    session_id: str,
    action_id: str,
    type_: str,
    ts: str,
    data: dict[str, Any],
    *,
    turn_id: str | None = None,
    run_id: str | None = None,
    client_id: str | None = None,
    intent_id: str | None = None,
) -> dict[str, Any]:
    """An action without its `seq` (the Host assigns that when it appends)."""
    return {
        "v": PROTOCOL_VERSION,
        "session_id": session_id,
        "id": action_id,
        "type": type_,
        "ts": ts,
        "turn_id": turn_id,
        "run_id": run_id,
        "client_id": client_id,
        "intent_id": intent_id,
        "data": data,
    }


def timestamp(seconds: float) -> str:
    """`seconds` (unix time) as an action's `ts`: RFC 3339 in UTC, milliseconds, `Z`."""
    m = datetime.fromtimestamp(seconds, UTC)
    # Fields, not strftime or isoformat: a fifth cheaper, and a turn's start writes three.
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond // 1000:03d}Z"
    )
