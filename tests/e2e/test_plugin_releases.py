"""The seed's acceptance sequence against a real `nua serve`: publish v1, release it to
`stable`, start a session; publish and release v2, start one; roll back, start one;
release v2 again, start one. Each session keeps the snapshot it was created with, every
execution records it, and the first session, parked on an approval across a `kill -9`
and restart, resumes and completes on v1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._support.plugins import publish_helper, release_helper
from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]


def start_session(client: httpx.Client, text: str) -> str:
    r = client.post("/v1/sessions", json={"deployment": "support", "client_id": "cli_t"})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    sent = client.post(f"/v1/sessions/{sid}/messages", json={"content": text})
    assert sent.status_code == 202, sent.text
    return sid


def state(client: httpx.Client, sid: str) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()["state"]
    return body


def executions(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    turns = state(client, sid)["turns"]
    return [client.get(f"/v1/executions/{t['execution_id']}").json() for t in turns]


def test_sessions_keep_the_version_they_were_created_with(tmp_path: Path) -> None:
    server = Server(tmp_path, step_delay="0.05").start()
    try:
        with server.client() as client:
            v1, v2 = publish_helper(client, "1.0.0"), None
            release_helper(client, "1.0.0")
            spec = {"plugin": "helper", "channel": "stable", "model": "scripted:demo"}
            assert client.put("/v1/deployments/support", json=spec).status_code == 200
            first = start_session(client, "report")
            opened = wait_for(lambda: state(client, first)["open_input_requests"], timeout=60)

            v2 = publish_helper(client, "2.0.0")
            release_helper(client, "2.0.0")
            second = start_session(client, "report")
            rolled = client.post("/v1/plugins/helper/channels/stable/rollback")
            assert rolled.json()["version"] == "1.0.0"
            third = start_session(client, "report")
            release_helper(client, "2.0.0")
            fourth = start_session(client, "report")

            expected = {first: v1, second: v2, third: v1, fourth: v2}
            snapshots = {}
            for sid, version in expected.items():
                s = state(client, sid)
                assert s["plugin"] == {
                    "name": "helper",
                    "version": version["version"],
                    "digest": version["digest"],
                }
                snapshots[sid] = s["snapshot_digest"]
                assert [e["snapshot_digest"] for e in executions(client, sid)] == [
                    s["snapshot_digest"]
                ]
            assert snapshots[first] == snapshots[third] != snapshots[second] == snapshots[fourth]
            history = client.get("/v1/plugins/helper").json()["history"]
            assert [(m["kind"], m["version"]) for m in history] == [
                ("release", "1.0.0"),
                ("release", "2.0.0"),
                ("rollback", "1.0.0"),
                ("release", "2.0.0"),
            ]

        server.kill9()
        server.start()
        with server.client() as client:
            assert state(client, first)["open_input_requests"] == opened
            request_id = opened[0]["request_id"]
            answered = client.post(
                f"/v1/sessions/{first}/input-requests/{request_id}/answer",
                json={"client_id": "cli_t", "option_id": "allow_once"},
            )
            assert answered.status_code == 200, answered.text
            final = wait_for(
                lambda: (s := state(client, first))["turns"][0]["state"] == "ended" and s,
                timeout=120,
            )
            turn = final["turns"][0]
            assert turn["stop_reason"] == "end_turn", turn["error"]
            assert len(turn["attempts"]) >= 2
            assert final["plugin"]["version"] == "1.0.0"
            assert final["snapshot_digest"] == snapshots[first]
            (execution,) = executions(client, first)
            assert execution["snapshot_digest"] == snapshots[first]
            # The materialized plugin the attempts ran: v1's files, by v1's digest.
            cached = tmp_path / "plugins" / v1["digest"].removeprefix("sha256:") / "AGENTS.md"
            assert cached.read_text() == "You are helper 1.0.0.\n"
    finally:
        server.stop()
