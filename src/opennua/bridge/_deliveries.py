"""Deliveries: stable identities, retry timing and the report a state change becomes.

Pure: time and randomness are passed in. A delivery's identity is derived from what it
delivers — (session, the action or request it comes from, kind) — never from when it was
made, so the bridge that restarts and derives it again gets the same id, and the same id
is the Matrix transaction id, so the homeserver deduplicates a retried `PUT` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from opennua._common import RetryPolicy
from opennua.protocol import ReportDelivery
from opennua.protocol.ids import derived_id

Status = Literal["pending", "sent", "retrying", "failed"]
CHANNEL = "matrix"


def delivery_id(session_id: str, source: str, kind: str) -> str:
    """`dlv_` + a ULID hashed from (session, source, kind): the same inputs, the same id."""
    return derived_id("delivery", session_id, source, kind)


def intent_key(source: str) -> str:
    """An intent id derived from a platform event (a Matrix event id): the bridge that sees
    the same event again after a restart sends the same intent, which the Host replays."""
    return derived_id("intent", source)


#: Deliveries back off 1, 2, 4 then 8 s (half of it random) and give up after 40 tries.
DELIVERY_RETRY = RetryPolicy(base=1.0, cap=8.0, max_attempts=40)


@dataclass(frozen=True)
class DeliveryState:
    """What the bridge knows of one delivery; every change is reported to the Host."""

    delivery_id: str
    session_id: str
    room_id: str
    kind: str
    status: Status
    attempts: int = 0
    event_id: str | None = None
    next_at: float | None = None
    error_code: str | None = None
    error_message: str | None = None


def report(state: DeliveryState, client_id: str, next_at: str | None) -> ReportDelivery:
    """The intent that tells the Host about `state`; keyed by (delivery, status, attempts)
    so re-sending the same report is a replay, not a second action."""
    error = None
    if state.error_code is not None:
        error = {"code": state.error_code, "message": state.error_message or state.error_code}
    return ReportDelivery.model_validate(
        {
            "intent_id": intent_key(f"{state.delivery_id}/{state.status}/{state.attempts}"),
            "client_id": client_id,
            "delivery_id": state.delivery_id,
            "channel": CHANNEL,
            "target": state.room_id,
            "kind": state.kind,
            "status": state.status,
            "attempts": state.attempts,
            "event_id": state.event_id,
            "next_attempt_at": next_at,
            "error": error,
        }
    )
