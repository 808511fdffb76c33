"""The desk's HTTP edge without a runtime: intake limits as problem JSON, who may review,
and the delivery webhook — Standard Webhooks signatures, replays dropped by event id,
out-of-order deliveries never moving a status back."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook
from starlette.testclient import TestClient

from feedback_desk.app import DeskConfig, create_app
from feedback_desk.db import Database
from feedback_desk.dispatch import prepare

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 64


@pytest.fixture
def desk(tmp_path: Path, database: str | None) -> Iterator[tuple[TestClient, Database]]:
    app = create_app(DeskConfig(database or tmp_path / "desk.sqlite3"))
    app.db.add_user("reviewer", "pw")
    app.db.set_setting("webhook_secret", SECRET)
    with TestClient(app, headers={"accept": "application/json"}) as client:
        yield client, app.db


def submit(client: TestClient, files: list[tuple[str, bytes]] = (), **fields: str) -> Any:  # type: ignore[assignment]
    data = {"title": "Crash", "body": "It crashes.", "email": "a@b.example"} | fields
    return client.post("/feedback", data=data, files=[("attachment", f) for f in files])


def test_intake_limits_are_problem_json(desk: tuple[TestClient, Database]) -> None:
    client, db = desk
    made = submit(client, [("shot.png", PNG), ("app.log", b"ERROR x\n")])
    assert made.status_code == 201 and made.json()["ticket_id"] == "T-1001"
    stored = db.attachments("T-1001")
    assert {(a["filename"], a["media_type"]) for a in stored} == {
        ("shot.png", "image/png"), ("app.log", "text/x-log")}  # fmt: skip
    cases = [
        (submit(client, [("big.log", b"x" * (1024 * 1024 + 1))]), 413, "attachment_too_large"),
        (submit(client, [("run.exe", b"MZ")]), 415, "unsupported_attachment"),
        (submit(client, [("fake.png", b"not a png")]), 415, "unsupported_attachment"),
        (submit(client, [("bin.txt", b"\xff\xfe\x00")]), 415, "unsupported_attachment"),
        (submit(client, [(f"{i}.txt", b"x") for i in range(4)]), 413, "too_many_attachments"),
        (submit(client, title=""), 422, "invalid_feedback"),
    ]
    for answer, status, code in cases:
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["code"] == code
    assert len(db.tickets()) == 1  # nothing refused was stored
    # The HTML form gets the page back with the message, not JSON.
    page = client.post(
        "/feedback", data={"title": "", "body": "x"}, headers={"accept": "text/html"}
    )
    assert page.status_code == 422 and "a title and a message are required" in page.text


def test_the_desk_is_for_reviewers_and_the_public_page_for_its_link(
    desk: tuple[TestClient, Database],
) -> None:
    client, _ = desk
    made = submit(client).json()
    assert client.get("/desk", follow_redirects=False).headers["location"] == "/login"
    refused = client.post("/desk/T-1001/dispatch")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    assert client.get("/t/not-the-token").status_code == 404
    assert client.get(made["public_url"]).status_code == 200
    wrong = client.post("/login", data={"username": "reviewer", "password": "nope"})
    assert wrong.status_code == 401
    client.post("/login", data={"username": "reviewer", "password": "pw"})
    no_runtime = client.post("/desk/T-1001/dispatch")
    assert no_runtime.status_code == 503 and no_runtime.json()["code"] == "runtime_unconfigured"
    assert client.get("/desk/T-9999").json()["code"] == "not_found"
    bad = client.post("/desk/T-1001/review", data={"revision": "x", "action": "publish"})
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
    none = client.post("/desk/T-1001/review", data={"revision": "1", "action": "publish"})
    assert none.status_code == 409 and none.json()["code"] == "no_draft"
    assert "a person will answer here" in client.get(made["public_url"]).text


def _dispatched(db: Database) -> None:
    db.create_ticket("Crash", "It crashes.", "A", "a@b.example")
    prepare(db, "T-1001")
    db.run("UPDATE tickets SET session_id = 'ses_1' WHERE ticket_id = 'T-1001'")
    db.update_dispatch("T-1001", 1, session_id="ses_1", turn_id="trn_1", status="accepted")


def _event(seq: int, kind: str, data: dict[str, Any], outcome: Any = None) -> dict[str, Any]:
    action = {"v": 1, "session_id": "ses_1", "seq": seq, "id": f"act_{seq}", "type": kind,
              "turn_id": "trn_1", "data": data}  # fmt: skip
    body: dict[str, Any] = {"event_id": f"evt_{seq}", "session_id": "ses_1", "action": action}
    if outcome is not None:
        body["outcome"] = outcome
    return {"type": kind, "timestamp": "2026-12-06T09:00:00.000Z", "data": body}


def _post(client: TestClient, payload: dict[str, Any], *, secret: str = SECRET,
          when: datetime | None = None) -> Any:  # fmt: skip
    body = json.dumps(payload)
    event_id = payload["data"]["event_id"]
    stamp = when or datetime.now(UTC)
    signature = Webhook(secret).sign(event_id, stamp, body)
    headers = {"webhook-id": event_id, "webhook-timestamp": str(int(stamp.timestamp())),
               "webhook-signature": signature, "content-type": "application/json"}  # fmt: skip
    return client.post("/hooks/opennua", content=body, headers=headers)


def test_deliveries_are_verified_idempotent_and_ordered(desk: tuple[TestClient, Database]) -> None:
    client, db = desk
    _dispatched(db)
    # An attempt starting is what says the turn runs (no `turn.state running` follows it).
    attempt = {"execution_id": "exe_1", "attempt": 1, "attempt_id": "att_1",
               "supervisor_id": "sup", "resumed_from_checkpoint": False}  # fmt: skip
    running = _event(5, "execution.attempt_started", attempt)
    result = {"category": "bug", "severity": 2, "evidence": [], "suspected_duplicates": [],
              "internal_analysis": "a", "reply_draft": "Thanks"}  # fmt: skip
    ended = _event(9, "turn.ended", {"stop_reason": "end_turn"},
                   {"stop_reason": "end_turn", "error": None, "output": result})  # fmt: skip

    forged = _post(client, running, secret="whsec_" + base64.b64encode(b"x" * 32).decode())
    assert forged.status_code == 401 and forged.json()["code"] == "bad_signature"
    stale = _post(client, running, when=datetime.fromtimestamp(time.time() - 3600, UTC))
    assert stale.status_code == 401  # a replayed capture outside the tolerance
    tampered = json.dumps(running).replace('"attempt": 1', '"attempt": 2')
    signed = Webhook(SECRET).sign("evt_5", datetime.now(UTC), json.dumps(running))
    headers = {"webhook-id": "evt_5", "webhook-timestamp": str(int(time.time())),
               "webhook-signature": signed}  # fmt: skip
    assert client.post("/hooks/opennua", content=tampered, headers=headers).status_code == 401
    assert db.dispatch("T-1001", 1)["status"] == "accepted"  # type: ignore[index]

    assert _post(client, running).json()["result"] == "applied"
    assert db.dispatch("T-1001", 1)["status"] == "working"  # type: ignore[index]
    assert _post(client, ended).json()["result"] == "applied"
    row = db.dispatch("T-1001", 1)
    assert row is not None and row["status"] == "draft ready" and row["output"] == result
    # The same event again (a retry, a replay): dropped by its id, nothing changes.
    db.update_dispatch("T-1001", 1, reply_edit="edited by a person")
    assert _post(client, ended).json()["result"] == "duplicate"
    assert db.dispatch("T-1001", 1)["reply_edit"] == "edited by a person"  # type: ignore[index]
    # An older fact delivered late (a retried try of seq 7) does not move the status back.
    late = _event(7, "execution.attempt_started", attempt | {"attempt": 2})
    assert _post(client, late).json()["result"] == "stale"
    assert db.dispatch("T-1001", 1)["status"] == "draft ready"  # type: ignore[index]
    assert [e["event_id"] for e in db.events_list()] == ["evt_5", "evt_9", "evt_7"]


def test_a_delivery_for_a_turn_not_yet_recorded_is_asked_again(
    desk: tuple[TestClient, Database],
) -> None:
    client, db = desk
    _dispatched(db)
    db.update_dispatch("T-1001", 1, turn_id=None)
    early = _event(3, "turn.state", {"state": "queued"})
    assert _post(client, early).status_code == 503  # the runtime retries it later
    db.update_dispatch("T-1001", 1, turn_id="trn_1")
    assert _post(client, early).json()["result"] == "applied"
    # A turn of the session the desk did not start (a person wrote in the web UI): not
    # the desk's, acknowledged and left alone.
    other = _event(4, "turn.ended", {"stop_reason": "end_turn"})
    other["data"]["action"]["turn_id"] = "trn_someone_else"
    other["data"]["event_id"] = "evt_other"
    answer = _post(client, other)
    assert answer.status_code == 200 and answer.json()["result"] == "unknown"
    assert db.dispatch("T-1001", 1)["status"] == "accepted"  # type: ignore[index]
