"""Event subscriptions through real `nua serve` processes and the `nua` CLI, to a real
receiver that verifies Standard Webhooks signatures: a scripted turn's `input.requested`
and `turn.ended` arrive (the first after a 500 and a retry), replays keep their
`webhook-id`, and a delivery pending when the server is `kill -9`ed arrives once after
the restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.automation._receiver import Receiver, receiving
from tests.e2e._proc import Server, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]
SERVE = ("--allow-private-subscriptions", "--subscription-retry-base", "0.3")


def nua(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NUA_URL=server.url, NUA_TOKEN=server.token)
    return subprocess.run(
        [sys.executable, "-m", "opennua.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def start_turn(client: httpx.Client) -> str:
    sid: str = client.post("/v1/sessions", json={"client_id": "cli_t"}).json()["session_id"]
    accepted = client.post(
        f"/v1/sessions/{sid}/messages",
        json={"client_id": "cli_t", "content": [{"type": "text", "text": "report"}]},
    )
    assert accepted.status_code == 202, accepted.text
    return sid


def of_type(receiver: Receiver, kind: str) -> list[dict[str, Any]]:
    return [p for p in receiver.delivered().values() if p["type"] == kind]


def test_a_scripted_turn_is_delivered_retried_and_replayed(tmp_path: Path) -> None:
    server = Server(tmp_path, args=SERVE).start()
    try:
        with receiving() as receiver, server.client() as client:
            created = nua(
                server, "subscription", "create", receiver.url,
                "--events", "turn.ended,input.requested",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            lines = created.stdout.split()
            sub = next(w for w in lines if w.startswith("sub_"))
            receiver.secret = next(w for w in lines if w.startswith("whsec_"))
            receiver.answers = [500]  # the first try fails: retried after ~0.3 s
            sid = start_turn(client)
            wait_for(lambda: of_type(receiver, "input_request.opened"), timeout=60)
            (opened,) = of_type(receiver, "input_request.opened")
            data = opened["data"]
            assert data["session_id"] == sid and data["deployment"] == "default"
            request_id = data["action"]["data"]["request_id"]
            answered = client.post(
                f"/v1/sessions/{sid}/input-requests/{request_id}/answer",
                json={"client_id": "cli_t", "option_id": "allow_once"},
            )
            assert answered.status_code == 200, answered.text
            wait_for(lambda: of_type(receiver, "turn.ended"), timeout=90)
            (ended,) = of_type(receiver, "turn.ended")
            outcome = ended["data"]["outcome"]
            assert outcome["stop_reason"] == "end_turn" and outcome["error"] is None
            assert outcome["answer"].startswith("Done.")
            assert outcome["output"] is None  # the demo plugin declares no result schema
            assert all(p.verified for p in receiver.posts)
            assert [p.status for p in receiver.posts] == [500, 200, 200]

            shown = nua(server, "subscription", "deliveries", sub, "--json")
            assert shown.returncode == 0, shown.stderr
            rows = [json.loads(line) for line in shown.stdout.splitlines()]
            by_type = {r["event_type"]: r for r in rows}
            assert set(by_type) == {"input_request.opened", "turn.ended"}
            assert by_type["input_request.opened"]["attempts"] == 2
            assert all(r["state"] == "delivered" and r["last_status"] == 200 for r in rows)

            again = nua(server, "subscription", "replay", sub, "--event", rows[0]["event_id"])
            assert again.returncode == 0, again.stderr
            wait_for(lambda: len(receiver.posts) == 4, timeout=30)
            assert receiver.posts[-1].webhook_id == rows[0]["event_id"]
            history = nua(server, "subscription", "replay", sub, "--from", "1", "--session", sid)
            assert history.returncode == 0, history.stderr
            wait_for(lambda: len(receiver.posts) == 6, timeout=30)
            assert len(receiver.delivered()) == 2  # six posts, two events

            listed = nua(server, "subscription", "list")
            assert sub in listed.stdout and receiver.secret not in listed.stdout
            # Bad input: one line and the documented exit codes.
            assert nua(server, "subscription", "show", "sub_nope").returncode == 3
            refused = nua(server, "subscription", "create", receiver.url, "--events", "nope")
            assert refused.returncode == 7 and "not an event type" in refused.stderr
            assert nua(server, "subscription", "replay", sub).returncode == 2
            assert nua(server, "subscription", "delete", sub).returncode == 0
            assert nua(server, "subscription", "show", sub).returncode == 3
    finally:
        server.stop()


def test_a_pending_delivery_arrives_once_after_kill9(tmp_path: Path) -> None:
    server = Server(tmp_path, args=SERVE).start()
    try:
        with receiving() as receiver:
            with server.client() as client:
                created = client.post(
                    "/v1/subscriptions", json={"url": receiver.url, "events": ["turn.started"]}
                )
                assert created.status_code == 201, created.text
                receiver.secret = created.json()["secret"]
                receiver.answers = [503] * 10_000  # down: every try fails
                start_turn(client)
                wait_for(lambda: receiver.posts, timeout=60)
            server.kill9()
            with receiver.lock:
                receiver.answers.clear()  # back up while the server is down
                failed_tries = len(receiver.posts)
            server.start()
            wait_for(lambda: receiver.delivered(), timeout=60)
            time.sleep(1.5)  # a second delivery would have come by now
            delivered = [p for p in receiver.posts[failed_tries:] if p.status == 200]
            assert len(delivered) == 1 and len(receiver.delivered()) == 1
            assert {p.webhook_id for p in receiver.posts} == set(receiver.delivered())
    finally:
        server.stop()
