"""`kill -9` of `nua serve` (SQLite) before and after an approval: the execution resumes as
a new attempt, the approval request stays the only one, and the final snapshot equals a
replay of the full history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.protocol import action_from_dict, replay, state_to_json
from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]


def _state(client: httpx.Client, sid: str) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()
    return body


def _history(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = []
    while True:
        page = client.get(f"/v1/sessions/{sid}/actions", params={"after": len(actions)}).json()
        items = page["actions"] if isinstance(page, dict) else page
        if not items:
            return actions
        actions.extend(items)


def test_kill9_before_and_after_the_approval_then_complete(tmp_path: Path) -> None:
    server = Server(tmp_path).start()
    try:
        with server.client() as client:
            sid = client.post("/v1/sessions", json={"title": "long", "client_id": "cli_t"}).json()[
                "session_id"
            ]
            accepted = client.post(
                f"/v1/sessions/{sid}/messages",
                json={"client_id": "cli_t", "content": [{"type": "text", "text": "report"}]},
            )
            assert accepted.status_code == 202
            opened = wait_for(lambda: _state(client, sid)["state"]["open_input_requests"])
        server.kill9()
        server.start()
        with server.client() as client:
            state = _state(client, sid)["state"]
            assert state["open_input_requests"] == opened, (
                "a restart must not open a second request"
            )
            request_id = opened[0]["request_id"]
            answered = client.post(
                f"/v1/sessions/{sid}/input-requests/{request_id}/answer",
                json={"client_id": "cli_t", "option_id": "allow_once"},
            )
            assert answered.status_code == 200, answered.text
            seq_after_answer = _state(client, sid)["seq"]
            # Let the resumed attempt do some work, then kill it mid-run.
            wait_for(lambda: _state(client, sid)["seq"] > seq_after_answer + 5, timeout=30)
        server.kill9()
        server.start()
        with server.client() as client:
            final = wait_for(
                lambda: (s := _state(client, sid))["state"]["turns"][0]["state"] == "ended" and s,
                timeout=90,
            )
            turn = final["state"]["turns"][0]
            assert turn["stop_reason"] == "end_turn", turn["error"]
            assert len(turn["attempts"]) >= 3
            assert all(a["resumed_from_checkpoint"] for a in turn["attempts"][1:])
            history = _history(client, sid)
            assert [a["seq"] for a in history] == list(range(1, len(history) + 1))
            replayed = replay(action_from_dict(raw) for raw in history)
            assert replayed["seq"] == final["seq"]
            assert state_to_json(replayed) == state_to_json(final["state"])
            assert final["state"]["anomalies"] == []
            statuses = [c["status"] for c in turn["tool_calls"].values()]
            assert all(s in {"completed", "failed", "cancelled"} for s in statuses), statuses
            assert len(turn["input_requests"]) == 1
    finally:
        server.stop()


def test_metrics_count_appends_and_claims_of_a_real_server(tmp_path: Path) -> None:
    server = Server(tmp_path, step_delay="0").start()
    try:
        with server.client() as client:
            sid = client.post("/v1/sessions", json={"title": "m", "client_id": "cli_t"}).json()[
                "session_id"
            ]
            client.post(
                f"/v1/sessions/{sid}/messages",
                json={"client_id": "cli_t", "content": [{"type": "text", "text": "go"}]},
            )
            wait_for(lambda: _state(client, sid)["state"]["open_input_requests"])
            # The supervisor may still append after the input request opens (the
            # execution parks); compare only a reading taken while the log stood still.
            readings: list[tuple[int, dict[str, float], int]] = []

            def quiet_reading() -> bool:
                before = _state(client, sid)["seq"]
                values = _metric_values(client.get("/metrics").text)
                after = _state(client, sid)["seq"]
                readings.append((before, values, after))
                return before == after

            wait_for(quiet_reading)
        seq, values, _ = readings[-1]
        assert values["nua_claims_total"] >= 1
        # Every action of the log was appended by this process: the host's and the
        # supervisor's alike.
        assert values["nua_actions_appended_total"] == seq
    finally:
        server.stop()


def _metric_values(text: str) -> dict[str, float]:
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_a_real_server_answers_errors_as_problem_json(tmp_path: Path) -> None:
    server = Server(tmp_path, step_delay="0").start()
    try:
        assert httpx.get(server.url + "/healthz").status_code == 200
        anonymous = httpx.get(server.url + "/v1/sessions")
        assert anonymous.status_code == 401
        assert anonymous.headers["content-type"].startswith("application/problem+json")
        assert anonymous.json()["code"] == "unauthorized"
        # A token in the query string of an API route is never accepted.
        leaked = httpx.get(server.url + "/v1/sessions", params={"token": server.token})
        assert leaked.status_code == 401
        with server.client() as client:
            missing = client.get("/v1/sessions/ses_01JNOPE0000000000000000000")
            assert missing.status_code == 404 and missing.json()["code"] == "not_found"
            invalid = client.post("/v1/sessions/ses_x/messages", json={"content": "not a list"})
            assert invalid.status_code in (404, 422)
            assert "code" in invalid.json()
    finally:
        server.stop()
