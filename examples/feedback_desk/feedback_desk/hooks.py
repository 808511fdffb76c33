"""Results by delivery: the runtime's event subscription POSTs each action of the desk's
deployment here, signed with Standard Webhooks (docs/subscriptions.md). Verified with the
reference library, applied once per event id, in seq order per dispatch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse
from standardwebhooks import Webhook, WebhookVerificationError

from feedback_desk.db import Database
from feedback_desk.dispatch import apply_event


def problem(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    """RFC 9457 problem JSON with a `code` (and `extra` members, which RFC 9457 allows)."""
    body = {"type": "about:blank", "title": code.replace("_", " "), "status": status,
            "code": code, "detail": detail, **extra}  # fmt: skip
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def receive(db: Database, body: bytes, headers: Mapping[str, str]) -> JSONResponse:
    secret = db.setting("webhook_secret")
    if secret is None:
        return problem(503, "not_subscribed", "the desk has no subscription secret yet")
    try:
        # Signature over id, timestamp and body; a timestamp outside 5 minutes is refused.
        payload = Webhook(secret).verify(body, dict(headers))
    except WebhookVerificationError as exc:
        return problem(401, "bad_signature", str(exc))
    event_id = headers["webhook-id"]
    if db.one("SELECT 1 FROM events WHERE event_id = ?", event_id):
        return JSONResponse({"event_id": event_id, "result": "duplicate"})
    result = apply_event(db, payload)
    if result == "unknown" and _awaited(db, payload):
        return problem(503, "not_ready", "that turn's dispatch is still being recorded")
    db.claim_event(event_id, payload["type"])
    return JSONResponse({"event_id": event_id, "result": result})


def _awaited(db: Database, payload: dict[str, Any]) -> bool:
    """Whether a dispatch in this event's session is sent but its answer not recorded yet:
    the event may be that dispatch's (any other turn — a person's in the web UI — is not
    the desk's and is acknowledged as unknown)."""
    found = db.one(
        "SELECT 1 FROM dispatches d JOIN tickets t ON t.ticket_id = d.ticket_id"
        " WHERE t.session_id = ? AND d.turn_id IS NULL",
        payload["data"].get("session_id"),
    )
    return found is not None
