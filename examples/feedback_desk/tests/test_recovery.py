"""The desk over time: `nua serve` killed (`kill -9`) mid-investigation and the desk
restarted while the result's delivery is pending — still one execution, one draft, one
reply; background consumption within its limit; the plugin upgraded, rolled back and
upgraded again, with the version and digest of each draft read from the runtime."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from feedback_desk.provision import PLUGIN, PLUGIN_DIR, publish

from .conftest import Stack, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


def test_kill9_mid_investigation_and_a_desk_restart_while_a_delivery_is_pending(
    tmp_path: Path,
) -> None:
    stack = Stack(tmp_path, model_delay=1.0)
    try:
        made = stack.submit("CSV export crash", "Export > CSV crashes on big reports.")
        ticket_id = made["ticket_id"]
        with stack.reviewer() as http:
            first = http.post(f"/desk/{ticket_id}/dispatch").json()
        # Mid-investigation: the model has been asked (the search), the turn has not ended.
        wait_for(lambda: stack.model.requests, timeout=60, what="the first model request")
        stack.server.kill9()
        before = len(stack.model.requests)
        stack.server.start()  # the execution resumes once its lease (2 s) expired

        # The resumed attempt searched the desk (up meanwhile) and now asks the model for
        # its answer (paced 1 s): the desk goes down before the result can be delivered.
        def resumed_with_evidence() -> bool:
            later = stack.model.requests[before:]
            return any(m["role"] == "tool" for r in later for m in r["messages"])

        wait_for(resumed_with_evidence, timeout=120, what="the resumed attempt's answer request")
        stack.desk.kill9()

        pending = wait_for(stack.pending_result, timeout=120, what="turn.ended pending at the desk")
        assert pending["last_error"] or pending["last_status"]
        stack.desk.start()
        with stack.reviewer() as http:
            draft = stack.wait_status(http, ticket_id, "draft ready")
            assert draft["execution_id"] == first["execution_id"]
            assert "T-1001" in {e["ref"] for e in draft["output"]["evidence"]}
            wait_for(
                lambda: any(d["event_type"] == "turn.ended" and d["state"] == "delivered"
                            for d in stack.deliveries()),
                timeout=60, what="the pending delivery delivered",
            )  # fmt: skip
            with stack.opennua() as nua_http:
                state = nua_http.get(f"/v1/sessions/{draft['session_id']}").json()["state"]
            assert [t["execution_id"] for t in state["turns"]] == [first["execution_id"]]
            assert len(state["turns"][0]["attempts"]) >= 2  # resumed by a new attempt
            assert len(stack.db.dispatches(ticket_id)) == 1
            reply = draft["output"]["reply_draft"]
            http.post(
                f"/desk/{ticket_id}/review",
                data={"revision": "1", "reply": reply, "action": "publish"},
            )
            assert len(http.get(f"/api/tickets/{ticket_id}").json()["replies"]) == 1
    finally:
        stack.close()


def test_background_consumption_keeps_to_its_limit(tmp_path: Path) -> None:
    stack = Stack(tmp_path, model_delay=0.5, limit=1)
    try:
        ids = [stack.submit(f"Export crash {n}", "Export crashes.")["ticket_id"] for n in range(3)]
        with stack.reviewer() as http:
            # Off by default: nothing is dispatched without a person.
            time.sleep(2.5)  # two background passes
            assert stack.db.dispatches() == []
            http.post("/desk/settings", data={"background": "on"})
            most = 0

            def all_ready() -> bool:
                nonlocal most
                rows = stack.db.dispatches()
                most = max(most, sum(r["status"] not in ("draft ready", "failed") for r in rows))
                return len(rows) == 3 and all(r["status"] == "draft ready" for r in rows)

            wait_for(all_ready, timeout=150, what="three drafts")
            assert most == 1  # never more than the limit open at once
            order = [r["ticket_id"] for r in stack.db.dispatches()]
            assert order == ids  # oldest first
    finally:
        stack.close()


def test_upgrade_rollback_upgrade_records_version_and_digest_per_draft(
    stack: Stack, tmp_path: Path
) -> None:
    v2 = tmp_path / "plugin-v2"
    shutil.copytree(PLUGIN_DIR, v2)
    with (v2 / "AGENTS.md").open("a") as agents:
        agents.write("\nSay which knowledge-base article a workaround comes from.\n")
    drafts: dict[str, dict[str, Any]] = {}
    with stack.reviewer() as http:

        def process(label: str) -> None:
            made = stack.submit(f"Export crash ({label})", "Export > CSV crashes.")
            http.post(f"/desk/{made['ticket_id']}/dispatch")
            draft = stack.wait_status(http, made["ticket_id"], "draft ready")
            drafts[label] = draft["plugin"] | {"ticket_id": made["ticket_id"]}

        process("v1")
        publish(stack.nua, "2.0.0", v2)
        process("v2")
        stack.nua("plugin", "rollback", PLUGIN)
        process("rolled back")
        stack.nua("plugin", "release", PLUGIN, "2.0.0")
        process("v2 again")
        versions = {label: d["version"] for label, d in drafts.items()}
        assert versions == {"v1": "1.0.0", "v2": "2.0.0", "rolled back": "1.0.0",
                            "v2 again": "2.0.0"}  # fmt: skip
        assert drafts["v1"]["digest"] == drafts["rolled back"]["digest"]
        assert drafts["v2"]["digest"] == drafts["v2 again"]["digest"] != drafts["v1"]["digest"]
        page = http.get(f"/desk/{drafts['v2']['ticket_id']}", headers={"accept": "text/html"})
        assert "plugin feedback-desk 2.0.0" in page.text
        assert drafts["v2"]["digest"][:19] in page.text
