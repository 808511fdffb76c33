"""Deliveries: stable identities, retry timing and the report a state change becomes.

Pure: time and randomness are passed in. A delivery's identity is derived from what it
delivers — (session, the action or request it comes from, kind) — never from when it was
made, so the bridge that restarts and derives it again gets the same id, and the same id
is the Matrix transaction id, so the homeserver deduplicates a retried `PUT` too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from ulid import ULID

from opennua.protocol import ReportDelivery

Status = Literal["pending", "sent", "retrying", "failed"]
CHANNEL = "matrix"


def delivery_id(session_id: str, source: str, kind: str) -> str:
    """`dlv_` + a ULID hashed from (session, source, kind): the same inputs, the same id."""
    digest = hashlib.sha256(f"{session_id}\x1f{source}\x1f{kind}".encode()).digest()[:16]
    return "dlv_" + str(ULID.from_bytes(digest))


def intent_key(source: str) -> str:
    """An intent id derived from a platform event (a Matrix event id): the bridge that sees
    the same event again after a restart sends the same intent, which the Host replays."""
    digest = hashlib.sha256(source.encode()).digest()[:16]
    return "int_" + str(ULID.from_bytes(digest))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with equal jitter: half the step is fixed, half random, so
    retries spread out but never collapse to zero. Gives up after `max_attempts`."""

    base: float = 1.0
    cap: float = 8.0
    max_attempts: int = 40

    def delay(self, attempts: int, unit_random: float) -> float:
        """Seconds before try `attempts + 1`; `unit_random` is uniform in [0, 1)."""
        step: float = min(self.cap, self.base * 2.0 ** max(0, attempts - 1))
        return step / 2 + step / 2 * unit_random

    def gives_up(self, attempts: int, permanent: bool) -> bool:
        return permanent or attempts >= self.max_attempts


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


def report(state: DeliveryState, client_id: str, rfc3339: str | None) -> ReportDelivery:
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
            "next_attempt_at": rfc3339,
            "error": error,
        }
    )
