"""The walk of one message and one answer through the store (docs/architecture.md, "The
walk of a message"): how many times each visits it. A visit is a round trip to the
database; the counts are the contract, so a new one is a decision made here."""

from __future__ import annotations

from typing import Any

from ._harness import AUTH, Env, park_for_input


def _count_visits(env: Env, monkeypatch: Any) -> list[str]:
    """Every read and every unit the store runs from now on, by name."""
    visits: list[str] = []
    store = env.store
    for hook in ("_read", "_scan", "_commit"):
        real = getattr(store, hook)

        async def counted(arg: Any, real: Any = real, hook: str = hook) -> Any:
            if hook == "_commit":
                visits.append("unit:" + "+".join(type(op).__name__ for op in arg.ops))
            else:
                visits.append("read:" + arg.gi_code.co_name)
            return await real(arg)

        monkeypatch.setattr(store, hook, counted)
    return visits


async def test_a_message_is_one_unit_and_three_reads_and_is_not_read_back(
    env: Env, monkeypatch: Any
) -> None:
    async with env.client(headers=AUTH) as client:
        created = await client.post("/v1/sessions", json={"title": "t", "client_id": "cli_a"})
        sid = created.json()["session_id"]
        body = {"content": [{"type": "text", "text": "hi"}], "client_id": "cli_a"}
        async with env.hub.subscribe(sid, 0) as subscription:  # a live client
            warm = await client.post(f"/v1/sessions/{sid}/messages", json=body)  # warm caches
            seen = [f async for f in _until(subscription, warm.json()["turn_id"])]
            assert seen and subscription.queued[0] == 0
            visits = _count_visits(env, monkeypatch)
            response = await client.post(f"/v1/sessions/{sid}/messages", json=body)
            assert response.status_code == 202, response.text
            # Queued for the live client already, and the Hub read nothing back.
            assert subscription.queued[0] == 1  # its turn.started
            assert visits == [
                "read:lookup_idempotency",
                "read:get_session",
                "read:list_executions",
                "unit:CreateExecution+PutGrant+Append+ClaimIdempotency",
            ]


async def test_an_answer_is_one_unit_and_is_not_read_back_by_the_hub(
    env: Env, monkeypatch: Any
) -> None:
    async with env.client(headers=AUTH) as client:
        created = await client.post("/v1/sessions", json={"title": "t", "client_id": "cli_a"})
        sid = created.json()["session_id"]
        body = {"content": [{"type": "text", "text": "hi"}], "client_id": "cli_a"}
        ids = (await client.post(f"/v1/sessions/{sid}/messages", json=body)).json()
        options = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]
        rid = await park_for_input(env, sid, ids["execution_id"], ids["turn_id"], options=options)
        async with env.hub.subscribe(sid, 0) as subscription:
            await anext(subscription.batches())  # its history: up to the opened request
            visits = _count_visits(env, monkeypatch)
            path = f"/v1/sessions/{sid}/input-requests/{rid}/answer"
            response = await client.post(path, json={"option_id": "allow", "client_id": "c"})
            assert response.status_code == 200, response.text
            assert subscription.queued[0] == 1  # input_request.resolved, handed over
        units = [v for v in visits if v.startswith("unit:")]
        assert units == ["unit:ResolveInput"]
        assert "read:read_actions" not in visits, visits


async def _until(subscription: Any, turn_id: str) -> Any:
    """Frames until the turn's `turn.started` (the accepted message's one action)."""
    import json

    async for frame in subscription:
        yield frame
        action = json.loads(frame.json)
        if action["type"] == "turn.started" and action["turn_id"] == turn_id:
            return
