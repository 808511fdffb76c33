"""Webhooks over real HTTP (uvicorn on a loopback port): Standard Webhooks signatures,
one run per `webhook-id`, problem JSON for bad input, 401 counted and never logged with
the payload, and the trigger recorded on the execution."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.automation import AutomationError, HookSpec, sign
from opennua.automation._service import secret_name
from opennua.store import DeploymentRecord

from ..server._harness import AUTH, Env, environment, serving
from .conftest import World

PROMPT = "Order {{ payload.order.id }} from {{ payload.customer }}: triage it."


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Env, httpx.AsyncClient]]:
    url = f"sqlite:///{tmp_path}/nua.db"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
    async with (
        environment(url, tmp_path) as env,
        serving(env.app) as at,
        httpx.AsyncClient(base_url=f"http://{at}", timeout=30) as c,
    ):
        yield env, c


async def _hook(c: httpx.AsyncClient, **kw: Any) -> dict[str, Any]:
    response = await c.post(
        "/v1/hooks", json={"name": "orders", "prompt": PROMPT, **kw}, headers=AUTH
    )
    assert response.status_code == 201, response.text
    hook: dict[str, Any] = response.json()
    return hook


def _database_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data.glob("nua.db*")))


def _signed(hook: dict[str, Any], delivery_id: str, payload: Any, *, at: int | None = None):
    body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    headers = sign(hook["secret"], delivery_id, int(time.time()) if at is None else at, body)
    return body, {**headers, "content-type": "application/json"}


async def test_a_delivery_starts_a_turn_as_the_deployments_principal(
    served: tuple[Env, httpx.AsyncClient], tmp_path: Path
) -> None:
    env, c = served
    hook = await _hook(c)
    assert hook["secret"].startswith("whsec_")
    assert hook["url"].endswith(f"/v1/hooks/{hook['hook_id']}")
    # The secret is shown once: listings never carry it.
    listed = (await c.get("/v1/hooks", headers=AUTH)).json()["hooks"]
    assert [h["hook_id"] for h in listed] == [hook["hook_id"]]
    assert "secret" not in listed[0] and hook["secret"] not in json.dumps(listed)
    # Kept sealed in the secret store: its value is nowhere in the database file.
    raw = hook["secret"].removeprefix("whsec_").encode()
    assert raw not in _database_bytes(tmp_path)  # (no file on PostgreSQL: the rows, below)
    stored = repr(await env.store.list_secrets())
    assert secret_name(hook["hook_id"]) in stored and raw.decode() not in stored
    body, headers = _signed(hook, "msg_1", {"order": {"id": 42}, "customer": "Ada"})
    response = await c.post(f"/v1/hooks/{hook['hook_id']}", content=body, headers=headers)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["delivery_id"] == "msg_1"
    execution = await env.store.get_execution(accepted["execution_id"])
    assert execution.input[0]["text"] == "Order 42 from Ada: triage it."
    assert execution.trigger["kind"] == "automation"
    assert execution.trigger["hook_id"] == hook["hook_id"]
    assert execution.trigger["delivery_id"] == "msg_1"
    owner = (await c.get("/v1/whoami", headers=AUTH)).json()["principal_id"]
    assert execution.principal_id == owner  # the default deployment's: the owner
    grant = await env.store.get_grant(execution.execution_id)
    assert grant is not None and grant.token_id is None  # no person's token behind it
    session = await env.store.get_session(accepted["session_id"])
    assert session.deployment == "default"


async def test_fifty_concurrent_redeliveries_are_one_run(
    served: tuple[Env, httpx.AsyncClient],
) -> None:
    env, c = served
    hook = await _hook(c)
    body, headers = _signed(hook, "msg_dup", {"order": {"id": 7}, "customer": "Bo"})
    url = f"/v1/hooks/{hook['hook_id']}"
    responses = await asyncio.gather(
        *(c.post(url, content=body, headers=headers) for _ in range(50))
    )
    assert [r.status_code for r in responses] == [202] * 50, {r.text for r in responses}
    answers = {json.dumps(r.json(), sort_keys=True) for r in responses}
    assert len(answers) == 1  # every redelivery got the original acceptance
    accepted = responses[0].json()
    assert len(await env.store.list_executions(accepted["session_id"])) == 1
    sessions = (await c.get("/v1/sessions", headers=AUTH)).json()["items"]
    assert len(sessions) == 1
    deliveries = await env.store.list_deliveries(hook["hook_id"])
    assert [(d.delivery_id, d.execution_id) for d in deliveries] == [
        ("msg_dup", accepted["execution_id"])
    ]
    # A later redelivery, fresh timestamp and signature, same webhook-id: the same answer.
    body2, headers2 = _signed(hook, "msg_dup", {"order": {"id": 7}, "customer": "Bo"})
    again = await c.post(url, content=body2, headers=headers2)
    assert again.status_code == 202 and again.json() == accepted
    # One acceptance; every other copy was a replay, and the metric says so (issue 35).
    metrics = (await c.get("/metrics", headers=AUTH)).text
    assert 'nua_webhook_deliveries_total{result="accepted"} 1.0' in metrics
    assert 'nua_webhook_deliveries_total{result="replayed"} 50.0' in metrics


async def test_an_old_timestamp_is_401_counted_and_not_logged(
    served: tuple[Env, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    env, c = served
    hook = await _hook(c)
    canary = "canary-payload-7f3a"
    url = f"/v1/hooks/{hook['hook_id']}"
    caplog.set_level(logging.DEBUG)
    old_body, old = _signed(hook, "msg_old", {"customer": canary}, at=int(time.time()) - 301)
    response = await c.post(url, content=old_body, headers=old)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "bad_signature"
    # The same body signed with another secret, and no signature at all.
    forged = sign("whsec_" + "A" * 43 + "=", "msg_f", int(time.time()), old_body)
    assert (await c.post(url, content=old_body, headers=forged)).status_code == 401
    assert (await c.post(url, content=old_body)).status_code == 401
    # An unknown hook looks the same as a bad signature.
    unknown = await c.post("/v1/hooks/hok_01NOPE", content=old_body, headers=old)
    assert unknown.status_code == 401 and unknown.json()["code"] == "bad_signature"
    metrics = (await c.get("/metrics", headers=AUTH)).text
    assert 'nua_webhook_deliveries_total{result="bad_signature"} 4.0' in metrics
    assert canary not in caplog.text
    assert "webhook" in caplog.text  # it was logged, without the payload
    assert await env.store.list_deliveries(hook["hook_id"]) == []
    # Kept for the hook's owner: three refusals of this hook (the unknown one is nobody's),
    # with the claimed webhook-id and the size, never the payload.
    seen = (await c.get(f"/v1/hooks/{hook['hook_id']}/deliveries", headers=AUTH)).json()
    assert seen["deliveries"] == []
    refusals = seen["refusals"]
    # (Newest first; the test's clock may stand still, so compared as a set.)
    assert {(r["code"], r["delivery_id"]) for r in refusals} == {
        ("bad_signature", None),
        ("bad_signature", "msg_f"),
        ("bad_signature", "msg_old"),
    }
    assert {r["body_bytes"] for r in refusals} == {len(old_body)}
    assert canary not in json.dumps(seen)


async def test_bad_payloads_get_problem_json(served: tuple[Env, httpx.AsyncClient]) -> None:
    _, c = served
    hook = await _hook(c, max_bytes=200)
    url = f"/v1/hooks/{hook['hook_id']}"
    cases = [
        (b"not json at all", 422, "invalid_payload"),
        (json.dumps({"customer": "x"}).encode(), 422, "invalid_payload"),  # no order.id
        (json.dumps({"order": {"id": 1}, "customer": "y" * 300}).encode(), 413,
         "payload_too_large"),
    ]  # fmt: skip
    for n, (body, status, code) in enumerate(cases):
        signed_body, headers = _signed(hook, f"msg_bad{n}", body)
        response = await c.post(url, content=signed_body, headers=headers)
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == code
    # The same webhook-id with another body is not a redelivery.
    body, headers = _signed(hook, "msg_x", {"order": {"id": 1}, "customer": "a"})
    assert (await c.post(url, content=body, headers=headers)).status_code == 202
    body, headers = _signed(hook, "msg_x", {"order": {"id": 2}, "customer": "a"})
    reused = await c.post(url, content=body, headers=headers)
    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"
    seen = (await c.get(f"{url}/deliveries", headers=AUTH)).json()
    assert [d["delivery_id"] for d in seen["deliveries"]] == ["msg_x"]
    assert {(r["code"], r["delivery_id"]) for r in seen["refusals"]} == {
        ("idempotency_key_reused", "msg_x"),
        ("payload_too_large", "msg_bad2"),
        ("invalid_payload", "msg_bad1"),
        ("invalid_payload", "msg_bad0"),
    }


async def test_deleting_a_hook_ends_its_deliveries(served: tuple[Env, httpx.AsyncClient]) -> None:
    _, c = served
    hook = await _hook(c)
    assert (await c.delete(f"/v1/hooks/{hook['hook_id']}", headers=AUTH)).status_code == 204
    body, headers = _signed(hook, "msg_late", {"order": {"id": 1}, "customer": "z"})
    late = await c.post(f"/v1/hooks/{hook['hook_id']}", content=body, headers=headers)
    assert late.status_code == 401


async def test_a_delivery_reads_its_deployment_once(
    sqlite_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Who the run acts as and which snapshot its session binds come from one read of the
    # deployment (the Host used to read it again to resolve the snapshot).
    w = sqlite_world
    spec = HookSpec(name="orders", deployment="default", prompt=PROMPT)
    hook, secret = await w.automation.create_hook(w.workspace_id, w.owner_id, spec)
    read = w.store.get_deployment
    reads: list[str] = []

    async def counted(name: str) -> DeploymentRecord:
        reads.append(name)
        return await read(name)

    monkeypatch.setattr(w.store, "get_deployment", counted)
    body, headers = _signed({"secret": secret}, "msg_1", {"order": {"id": 7}, "customer": "Bo"})
    accepted = (await w.automation.deliver(hook.hook_id, body, headers)).answer
    assert reads == ["default"]
    session = await w.store.get_session(accepted["session_id"])
    assert (session.deployment, session.deployment_digest) == (
        "default",
        (await read("default")).digest,
    )
    assert (await w.store.get_execution(accepted["execution_id"])).principal_id == w.owner_id


async def test_a_prompt_field_no_delivery_can_have_is_refused_at_creation(
    sqlite_world: World,
) -> None:
    # Every delivery to such a hook would be 422: the hook is refused instead, as a
    # schedule naming a field it never has is.
    w = sqlite_world
    for prompt in ("{{ fire_time }}", "{{ hook.name }}", "{{ payloads.x }}", "{{ Payload }}"):
        spec = HookSpec(name="never", deployment="default", prompt=f"Triage {prompt}")
        with pytest.raises(AutomationError) as caught:
            await w.automation.create_hook(w.workspace_id, w.owner_id, spec)
        assert caught.value.code == "invalid_hook", prompt
        assert prompt.strip("{} ") in caught.value.detail
    assert await w.automation.hooks(w.workspace_id) == []
    for n, prompt in enumerate(("{{ payload }}", "{{ hook }}", "{{ payload.items.0.id }}")):
        spec = HookSpec(name=f"fine{n}", deployment="default", prompt=prompt)
        await w.automation.create_hook(w.workspace_id, w.owner_id, spec)
