"""Bad input to the subscription routes is a clear answer, never a 500 from the database."""

from __future__ import annotations

from tests._support.plugins import problem

from ._harness import AUTH, Env


async def test_a_replay_from_a_seq_beyond_64_bits_is_refused_and_a_real_one_queued(
    env: Env,
) -> None:
    async with env.client(headers=AUTH) as c:
        made = await c.post(
            "/v1/subscriptions",
            json={"url": "https://example.org/hooks", "events": ["turn.ended"]},
        )
        assert made.status_code == 201, made.text
        sub = made.json()["subscription_id"]
        sid = (await c.post("/v1/sessions", json={"title": "t"})).json()["session_id"]
        path = f"/v1/subscriptions/{sub}/replay"
        # Past any log's end, and past what the store's integer holds (SQLite would raise):
        # nothing to replay, queued as such, never a 500.
        for seq in (1 << 63, 10**30, (1 << 63) - 1):
            queued = await c.post(path, json={"session_id": sid, "from_seq": seq})
            assert queued.status_code == 202, queued.text
        assert (await c.get(f"/v1/subscriptions/{sub}/deliveries")).json()["deliveries"] == []
        problem(await c.post(path, json={"session_id": sid, "from_seq": 0}), 422,
                "validation_error")  # fmt: skip
