"""The automation column: turns started by a signed webhook (a new session) or by a
schedule bound to the session, with nobody watching; followed, answered and read through
the Python client, as an automation's own script (or its operator) would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

from tests._support.polling import wait_for
from tests.conformance._drivers import PythonDriver
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """A Standard Webhooks `webhook-signature`, computed as a sender does."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class AutomationDriver(PythonDriver):
    column = "automation"
    client_id = "cli_matrix_automation"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        with server.client() as http:
            made = http.post("/v1/hooks", json={"name": "matrix", "prompt": "{{ payload.text }}"})
        assert made.status_code == 201, made.text
        self.hook = made.json()

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        if sid is None:
            return self._deliver(text)
        return self._fire(sid, text)

    def _deliver(self, text: str) -> str:
        body = json.dumps({"text": text}).encode()
        webhook_id, now = f"msg_{uuid.uuid4().hex}", int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": webhook_id,
            "webhook-timestamp": str(now),
            "webhook-signature": sign(self.hook["secret"], webhook_id, now, body),
        }
        with self.server.client() as http:
            accepted = http.post(f"/v1/hooks/{self.hook['hook_id']}", content=body, headers=headers)
        assert accepted.status_code == 202, accepted.text
        sid, turn = str(accepted.json()["session_id"]), accepted.json()["turn_id"]
        self._assert_automated(sid, turn, f"webhook:{self.hook['hook_id']}/{webhook_id}")
        self._watch(sid)
        return sid

    def _assert_automated(self, sid: str, turn_id: str, source: str) -> None:
        # The column is only automation if the Host recorded the trigger as such.
        turn = next(t for t in self.host.state(sid)["turns"] if t["turn_id"] == turn_id)
        assert turn["trigger"]["kind"] == "automation", turn["trigger"]
        assert turn["trigger"]["source"].startswith(source), turn["trigger"]

    def _fire(self, sid: str, text: str) -> str:
        # One slot, a few seconds ahead (cron with seconds, in UTC): it fires once.
        at = datetime.now(UTC) + timedelta(seconds=3)
        cron = f"{at.minute} {at.hour} {at.day} {at.month} * {at.second}"
        spec = {"name": f"matrix-{uuid.uuid4().hex[:8]}", "cron": cron, "timezone": "UTC",
                "prompt": text, "session_id": sid}  # fmt: skip
        with self.server.client() as http:
            made = http.post("/v1/schedules", json=spec)
            assert made.status_code == 201, made.text
            schedule = made.json()["schedule_id"]

            def fired() -> list[dict[str, str]]:
                runs: list[dict[str, str]] = http.get(f"/v1/schedules/{schedule}/runs").json()[
                    "runs"
                ]
                return runs

            [run] = wait_for(fired, timeout=60, interval=0.3)
            http.delete(f"/v1/schedules/{schedule}")
        assert run["session_id"] == sid, run
        self._assert_automated(sid, run["turn_id"], f"schedule:{schedule}@")
        return sid

    def _watch(self, sid: str) -> None:
        async def follow() -> None:
            self._ensure_follow(sid)

        self.loop.run(follow())
