"""Fencing with real processes on PostgreSQL: the owner of an execution is paused past its
lease (SIGSTOP), a second supervisor claims it (epoch + 1) and continues; the first one,
resumed (SIGCONT), is refused on every write and stops itself. The log has no duplicated
or reordered action and the side effect ran once."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.protocol import action_from_dict, replay, state_to_json
from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(180)]


def _history(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = []
    while page := client.get(f"/v1/sessions/{sid}/actions", params={"after": len(actions)}).json()[
        "actions"
    ]:
        actions.extend(page)
    return actions


def _attempts(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    return [a for a in _history(client, sid) if a["type"] == "execution.attempt_started"]


def test_a_paused_owner_is_fenced_and_the_other_supervisor_finishes(
    tmp_path: Path, pg_url: str
) -> None:
    host = Server(tmp_path, db=pg_url, role="host").start()
    first = Server(tmp_path, db=pg_url, role="supervisor", step_delay="0.5").start()
    second = Server(tmp_path, db=pg_url, role="supervisor", step_delay="0.5")
    try:
        with host.client() as client:
            sid = client.post("/v1/sessions", json={"title": "f", "client_id": "cli_t"}).json()[
                "session_id"
            ]
            client.post(
                f"/v1/sessions/{sid}/messages",
                json={"client_id": "cli_t", "content": [{"type": "text", "text": "report"}]},
            )
            request = wait_for(
                lambda: client.get(f"/v1/sessions/{sid}").json()["state"]["open_input_requests"],
                timeout=60,
            )[0]
            answer = client.post(
                f"/v1/sessions/{sid}/input-requests/{request['request_id']}/answer",
                json={"client_id": "cli_t", "option_id": "allow_once"},
            )
            assert answer.status_code == 200, answer.text
            wait_for(lambda: len(_attempts(client, sid)) == 2, timeout=30)
            owner = _attempts(client, sid)[-1]["data"]["supervisor_id"]
            # Let the resumed attempt work a little, then freeze it mid-run.
            seq = client.get(f"/v1/sessions/{sid}").json()["seq"]
            wait_for(lambda: client.get(f"/v1/sessions/{sid}").json()["seq"] > seq + 2)
            first.signal(signal.SIGSTOP)
            second.start()
            wait_for(lambda: len(_attempts(client, sid)) == 3, timeout=30)
            taker = _attempts(client, sid)[-1]["data"]["supervisor_id"]
            assert taker != owner
            first.signal(signal.SIGCONT)

            def ended() -> dict[str, Any] | None:
                body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()
                return body if body["state"]["turns"][0]["state"] == "ended" else None

            final = wait_for(ended, timeout=90)
            # The resumed first supervisor must notice it lost the lease and stop.
            wait_for(
                lambda: (
                    b"fenced" in first.log.read_bytes()
                    or b"lost its lease" in first.log.read_bytes()
                ),
                timeout=20,
            )
            history = _history(client, sid)
            execution_id = final["state"]["turns"][0]["execution_id"]
            execution = client.get(f"/v1/executions/{execution_id}").json()

        assert [a["seq"] for a in history] == list(range(1, len(history) + 1))
        ids = [a["id"] for a in history]
        assert len(ids) == len(set(ids)), "an action was appended twice"
        replayed = replay(action_from_dict(raw) for raw in history)
        assert state_to_json(replayed) == state_to_json(final["state"])
        turn = replayed["turns"][0]
        assert replayed["anomalies"] == []
        assert turn["stop_reason"] == "end_turn", turn["error"]
        assert [a["attempt"] for a in turn["attempts"]] == [1, 2, 3]
        assert execution["epoch"] >= 3
        assert all(
            c["status"] in {"completed", "failed", "cancelled"} for c in turn["tool_calls"].values()
        )
        checks = tmp_path / "workspaces" / sid / "checks.log"  # the session's workspace
        assert checks.read_text().count("lines") == 1, "the approved shell command ran twice"
    finally:
        for server in (second, first, host):
            if server.proc is not None:
                server.signal(signal.SIGCONT)
            server.stop()
