"""The desk against a real `nua serve` (scripted model, real gateway, real deliveries):
intake → dispatch once → investigation through the desk's MCP server → draft by webhook →
review and publish → follow-up in the same session; redaction read back from the runtime's
log; output-schema enforcement; a dispatch whose answer was lost finds its execution."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from feedback_desk.db import Database
from feedback_desk.dispatch import Runtime, dispatch

from .conftest import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

EMAIL, PHONE, TOKEN = "dana.kim@example.com", "+1 415 555 0134", "sk-live-4f9a8b7c6d5e4f3a2b1c"
LOG = (
    "2026-12-06 10:00:01 INFO export started rows=40000\n"
    f"2026-12-06 10:00:07 ERROR csv writer failed: buffer overflow (user {EMAIL})\n"
    f"2026-12-06 10:00:07 DEBUG auth header Bearer {TOKEN}\n"
).encode()


def log_of(stack: Stack, session_id: str) -> str:
    """Every action of the session, as the runtime's API returns them."""
    with stack.opennua() as http:
        answer = http.get(f"/v1/sessions/{session_id}/actions", params={"after": 0, "limit": 1000})
        assert answer.status_code == 200, answer.text
        return answer.text


@pytest.fixture
def any_stack(tmp_path: Path, database: str | None) -> Iterator[Stack]:
    """The stack with the desk on SQLite, and again on PostgreSQL."""
    made = Stack(tmp_path, database=database)
    try:
        yield made
    finally:
        made.close()


def test_submit_dispatch_once_draft_by_delivery_publish_and_follow_up(any_stack: Stack) -> None:
    stack = any_stack
    body = f"Export > CSV crashes on our big report. Call me at {PHONE} or write to {EMAIL}."
    made = stack.submit("CSV export crash on big report", body, [("export.log", LOG)])
    ticket_id = made["ticket_id"]
    with stack.reviewer() as http, httpx.Client(base_url=stack.desk.url) as public:
        # Nothing is dispatched by itself: background consumption is off by default.
        assert http.get(f"/api/tickets/{ticket_id}").json()["dispatches"] == []
        first = http.post(f"/desk/{ticket_id}/dispatch").json()
        again = http.post(f"/desk/{ticket_id}/dispatch").json()
        assert first["execution_id"] and again["execution_id"] == first["execution_id"]
        assert first["idempotency_key"].endswith(f"-{ticket_id}-r1")
        assert first["status"] in ("accepted", "working")
        record = first["context"]
        assert record["fields_sent"] == ["title", "body"] and "email" in record["fields_kept"]
        assert record["redactions"] == {"email": 2, "phone": 1, "token": 1}
        assert record["attachments"][0]["sent"] == "redacted excerpt"

        draft = stack.wait_status(http, ticket_id, "draft ready")
        # By delivery: the desk received and verified the turn.ended event.
        assert "turn.ended" in {e["type"] for e in stack.events()}
        out = draft["output"]
        assert out["category"] == "bug"
        refs = {e["ref"] for e in out["evidence"]}
        assert "T-1001" in refs and "KB-1" in refs, out  # the earlier ticket, the article
        assert any(
            e["kind"] == "log_line" and "ERROR csv writer" in e["quote"] for e in out["evidence"]
        )
        assert out["suspected_duplicates"][0]["ticket_id"] == "T-1001"
        assert draft["plugin"]["name"] == "feedback-desk" and draft["plugin"]["version"] == "1.0.0"
        assert draft["plugin"]["digest"].startswith("sha256:")

        # The runtime's log, read back through its API: no personal data ever reached it.
        session_id = draft["session_id"]
        logged = log_of(stack, session_id)
        for secret in (EMAIL, PHONE, TOKEN, "dana.kim", "415 555"):
            assert secret not in logged
        assert "[email]" in logged and "[token]" in logged and "T-1001" in logged
        sent_to_model = json.dumps(stack.model.requests)
        assert EMAIL not in sent_to_model and TOKEN not in sent_to_model
        # …nor did the desk's API key: the gateway injected it, the model never saw it.
        api_key = stack.db.setting("api_key")
        assert api_key and api_key not in logged and api_key not in sent_to_model
        with stack.opennua() as nua_http:
            executions = {
                t["execution_id"]
                for t in nua_http.get(f"/v1/sessions/{session_id}").json()["state"]["turns"]
            }
        assert executions == {first["execution_id"]}  # dispatched once

        # Nothing public before a person acts.
        page = public.get(made["public_url"]).text
        assert out["reply_draft"] not in page and "a person will answer here" in page

        edited = "We found the cause: large CSV exports fail. Use Scheduled export meanwhile."
        saved = http.post(
            f"/desk/{ticket_id}/review",
            data={"revision": "1", "reply": edited, "link:T-1001": "accept", "action": "save"},
        )
        assert saved.status_code == 200 and saved.json() == {"saved": True, "published": False}
        assert edited not in public.get(made["public_url"]).text
        published = http.post(
            f"/desk/{ticket_id}/review",
            data={"revision": "1", "reply": edited, "link:T-1001": "accept", "action": "publish"},
        )
        assert published.json()["published"] is True
        assert edited in public.get(made["public_url"]).text
        assert stack.db.all("SELECT linked_id FROM links WHERE ticket_id = ?", ticket_id) == [
            {"linked_id": "T-1001"}
        ]

        # Follow-up: the same session, a new turn, an updated analysis.
        token = made["public_url"].rsplit("/", 1)[1]
        replied = public.post(
            f"/t/{token}/reply", data={"body": f"It also happens with 20,000 rows. {EMAIL}"},
            headers={"accept": "application/json"},
        )  # fmt: skip
        assert replied.status_code == 201 and replied.json()["revision"] == 2
        second = http.post(f"/desk/{ticket_id}/dispatch").json()
        assert (
            second["session_id"] == session_id and second["execution_id"] != first["execution_id"]
        )
        assert second["context"]["fields_sent"] == ["follow_up"]
        updated = stack.wait_status(http, ticket_id, "draft ready", revision=2)
        assert updated["output"]["internal_analysis"].startswith("Updated after the follow-up")
        with stack.opennua() as nua_http:
            turns = nua_http.get(f"/v1/sessions/{session_id}").json()["state"]["turns"]
        assert len(turns) == 2 and turns[1]["execution_id"] == second["execution_id"]
        assert EMAIL not in log_of(stack, session_id)


def test_output_schema_retried_then_failed_clearly(stack: Stack) -> None:
    once = stack.submit("Export error #invalid-once", "The export fails with an error.")
    never = stack.submit("Export error #invalid-always", "The export fails with an error.")
    with stack.reviewer() as http:
        for made in (once, never):
            assert http.post(f"/desk/{made['ticket_id']}/dispatch").status_code == 200
        fixed = stack.wait_status(http, once["ticket_id"], "draft ready")
        assert 1 <= fixed["output"]["severity"] <= 4
        failed = stack.wait_status(http, never["ticket_id"], "failed")
        assert failed["output"] is None and failed["error"]["code"] == "output_invalid"
        assert "severity" in failed["error"]["message"]
        # The failure is shown on the review page, and there is nothing to publish.
        page = http.get(f"/desk/{never['ticket_id']}", headers={"accept": "text/html"}).text
        assert "output_invalid" in page
        refused = http.post(
            f"/desk/{never['ticket_id']}/review",
            data={"revision": "1", "reply": "x", "action": "publish"},
        )
        assert refused.status_code == 409 and refused.json()["code"] == "no_draft"
    retries = [
        m for r in stack.model.requests for m in r["messages"]
        if m["role"] == "user" and "does not conform" in str(m.get("content"))
    ]  # fmt: skip
    assert retries  # the runtime sent the invalid answer back before accepting the fix


class LoseFirstAnswer(httpx.AsyncBaseTransport):
    """Forwards every request; the first `POST …/messages` reaches the server and its answer
    is then lost (the connection 'drops')."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lost: dict[str, Any] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if (
            self.lost is None
            and request.method == "POST"
            and request.url.path.endswith("/messages")
        ):
            await response.aread()
            self.lost = json.loads(response.content)
            raise RuntimeError("the desk crashed before recording the answer")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_dispatch_whose_answer_was_lost_finds_the_same_execution(stack: Stack) -> None:
    made = stack.submit("Dark mode?", "Is there a dark mode for the dashboard?")
    ticket_id = made["ticket_id"]
    db = Database(stack.db_path)
    lossy = LoseFirstAnswer()

    async def run() -> dict[str, Any]:
        runtime = Runtime(stack.server.url, stack.token, transport=lossy)
        try:
            with pytest.raises(RuntimeError, match="crashed"):
                await dispatch(db, runtime, ticket_id)
            pending = db.dispatch(ticket_id, 1)
            assert pending is not None and pending["status"] == "dispatching"
            assert pending["turn_id"] is None  # the answer never got recorded
            return await dispatch(db, runtime, ticket_id)  # the retry
        finally:
            await runtime.aclose()

    try:
        retried = asyncio.run(run())
    finally:
        db.close()
    assert lossy.lost is not None
    assert retried["execution_id"] == lossy.lost["execution_id"]
    assert retried["turn_id"] == lossy.lost["turn_id"]
    with stack.opennua() as http:
        state = http.get(f"/v1/sessions/{retried['session_id']}").json()["state"]
    assert [t["execution_id"] for t in state["turns"]] == [lossy.lost["execution_id"]]
    with stack.reviewer() as desk:
        stack.wait_status(desk, ticket_id, "draft ready")
