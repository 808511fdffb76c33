"""`nua schedule …` and `nua hook …` against a real `nua serve` (its scheduler included):
a per-second schedule fires and shows its runs; a hook prints its URL and secret once; a
webhook-started turn waits for approval like any other and is answered from the CLI."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from opennua.automation import sign
from opennua.cli._context import ExitCode
from tests._support.polling import wait_for

from .conftest import Nua


def _lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_a_schedule_fires_and_is_managed_from_the_cli(nua: Nua) -> None:
    bad = nua("schedule", "create", "broken", "every day", "--prompt", "x")
    assert bad.exit_code == ExitCode.REJECTED, bad.output
    assert "cron" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    created = nua(
        "schedule", "create", "ticker", "* * * * * *", "--prompt", "tick {{ fire_time }}",
        "--tz", "Europe/Paris", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    schedule = json.loads(created.stdout)
    sid = schedule["schedule_id"]
    assert schedule["next_fire_time"] is not None
    listed = nua("schedule", "list")
    assert sid in listed.stdout and "ticker" in listed.stdout and "next " in listed.stdout

    def fired() -> list[dict[str, Any]] | None:
        runs = _lines(nua("schedule", "runs", sid, "--json").stdout)
        return runs if len(runs) >= 2 else None

    runs = wait_for(fired, timeout=30)
    # Seconds, not the tick's milliseconds: a run of the whole suite once lagged 5 s.
    assert all(r["lag_seconds"] < 10 for r in runs), runs
    assert len({r["fire_time"] for r in runs}) == len(runs)
    paused = nua("schedule", "pause", sid, "--json")
    assert paused.exit_code == 0 and json.loads(paused.stdout)["paused"] is True
    time.sleep(1.5)
    settled = len(_lines(nua("schedule", "runs", sid, "--json", "--limit", "500").stdout))
    time.sleep(2)
    assert len(_lines(nua("schedule", "runs", sid, "--json", "--limit", "500").stdout)) == settled
    human = nua("schedule", "runs", sid)
    assert human.exit_code == 0 and "ses_" in human.stdout
    resumed = nua("schedule", "resume", sid, "--json")
    assert json.loads(resumed.stdout)["paused"] is False
    assert nua("schedule", "delete", sid).exit_code == 0
    gone = nua("schedule", "delete", sid)
    assert gone.exit_code == ExitCode.NOT_FOUND, gone.output


def test_a_hook_turn_waits_for_approval_and_the_cli_answers_it(nua: Nua) -> None:
    created = nua("hook", "create", "tickets", "--prompt", "Ticket: {{ payload.title }}")
    assert created.exit_code == 0, created.output
    lines = dict(
        line.split(":", 1)
        for line in created.stdout.splitlines()
        if line.startswith(("url", "secret"))
    )
    url, secret = lines["url"].strip(), lines["secret"].strip()
    assert secret.startswith("whsec_") and url.startswith(nua.server.url + "/v1/hooks/hok_")
    listed = nua("hook", "list", "--json")
    assert secret not in listed.stdout and url in listed.stdout
    body = json.dumps({"title": "printer on fire"}).encode()
    headers = sign(secret, "evt_1", int(time.time()), body)
    delivered = httpx.post(url, content=body, headers=headers, timeout=10)
    assert delivered.status_code == 202, delivered.text
    session_id = delivered.json()["session_id"]
    # The demo agent asks before its tool call: the automated turn waits like any other.
    request_id = nua.open_request(session_id)
    answered = nua("answer", session_id, request_id, "--option", "allow_once", "--json")
    assert answered.exit_code == 0, answered.output
    ended = wait_for(
        lambda: (t := nua.state(session_id)["turns"][-1])["state"] == "ended" and t, timeout=60
    )
    assert ended["stop_reason"] == "end_turn"
    assert ended["trigger"]["kind"] == "automation"
    hook_id = url.rsplit("/", 1)[1]
    assert nua("hook", "delete", hook_id).exit_code == 0
    late = httpx.post(url, content=body, headers=sign(secret, "evt_2", int(time.time()), body))
    assert late.status_code == 401


def test_a_hook_on_a_viewer_principals_deployment_cannot_act(nua: Nua) -> None:
    """The owner's hook, on a deployment that runs as an agent principal with only
    `viewer`: the turn runs as that principal and ends `revoked` at claim; the hook's
    creator lends it nothing."""
    with nua.http() as http:
        me = http.get("/v1/whoami").json()
        workspace = me["workspaces"][0]["workspace_id"]
        agent = http.post(
            f"/v1/workspaces/{workspace}/agent-principals",
            json={"name": "night-bot", "role": "viewer"},
        ).json()
        saved = http.put(
            "/v1/deployments/night",
            json={"plugin": "default", "model": "scripted:demo",
                  "principal_id": agent["principal_id"]},
        )  # fmt: skip
        assert saved.status_code == 200, saved.text
        hook = http.post("/v1/hooks", json={"name": "night", "deployment": "night",
                                           "prompt": "{{ payload.task }}"}).json()  # fmt: skip
    body = json.dumps({"task": "delete everything"}).encode()
    delivered = httpx.post(
        hook["url"], content=body, headers=sign(hook["secret"], "evt_n", int(time.time()), body)
    )
    assert delivered.status_code == 202, delivered.text
    accepted = delivered.json()
    ended = wait_for(
        lambda: (t := nua.state(accepted["session_id"])["turns"][-1])["state"] == "ended" and t,
        timeout=60,
    )
    assert ended["stop_reason"] == "revoked"
    with nua.http() as http:
        execution = http.get(f"/v1/executions/{accepted['execution_id']}").json()
    assert execution["principal_id"] == agent["principal_id"]
    assert execution["trigger"]["principal_id"] == me["principal_id"]
