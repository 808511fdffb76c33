"""Appends that share one group commit: each caller gets its own outcome.

On SQLite these run as one set-based append in the writer (_sqlite_ops), on PostgreSQL
as one call of nua_unit; the same assertions hold for every backend.
"""

from __future__ import annotations

import asyncio

import pytest

from opennua.store import NotFound, Store

from .conftest import action


async def test_grouped_appends_fail_alone_and_dedupe_across_callers(store: Store) -> None:
    for sid in ("ses_a", "ses_b"):
        await store.create_session(sid, created_at=1.0)
    await store.append("ses_a", [action("ses_a", 1)])
    outcomes = await asyncio.gather(
        store.append("ses_a", [action("ses_a", 1), action("ses_a", 2)]),  # 1 is known
        store.append("ses_missing", [action("ses_missing", 1)]),
        store.append("ses_b", [action("ses_b", 1), action("ses_b", 1)]),  # same id twice
        store.append("ses_a", [action("ses_a", 2), action("ses_a", 3)]),  # 2 from a peer
        return_exceptions=True,
    )
    assert outcomes[0] == [1, 2]
    assert isinstance(outcomes[1], NotFound)
    assert outcomes[2] == [1, 1]
    assert outcomes[3] == [2, 3]
    assert [a["seq"] for a in await store.read("ses_a")] == [1, 2, 3]
    assert [a["id"] for a in await store.read("ses_b")] == [action("ses_b", 1)["id"]]
    body = (await store.read("ses_a"))[2]
    assert (body["session_id"], body["seq"], body["data"]) == (
        "ses_a",
        3,
        action("ses_a", 3)["data"],
    )


async def test_a_transaction_may_append_twice(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0)
    async with store.transaction() as tx:
        first = tx.append("ses_a", [action("ses_a", 1)])
        second = tx.append("ses_a", [action("ses_a", 2), action("ses_a", 1)])
    assert (first.value, second.value) == ([1], [2, 1])
    assert tx.seqs == {"ses_a": [1, 2, 1]}


@pytest.mark.parametrize("n", [1, 250])
async def test_many_callers_one_session_stay_gapless(store: Store, n: int) -> None:
    await store.create_session("ses_a", created_at=1.0)
    got = await asyncio.gather(*(store.append("ses_a", [action("ses_a", k)]) for k in range(n)))
    assert sorted(s for (s,) in got) == list(range(1, n + 1))


async def test_ids_new_in_one_batch_are_told_apart_by_session_and_id(store: Store) -> None:
    # ("ses a", "b") and ("ses", "a b") join to the same text with a space between.
    for sid in ("ses a", "ses"):
        await store.create_session(sid, created_at=1.0)
    outcomes = await asyncio.gather(
        store.append("ses a", [{"id": "b", "type": "t"}]),
        store.append("ses", [{"id": "a b", "type": "t"}]),
        store.append("ses a", [{"id": "b", "type": "t"}, {"id": "c", "type": "t"}]),
    )
    assert outcomes == [[1], [1], [1, 2]]
    assert [a["id"] for a in await store.read("ses")] == ["a b"]
    assert [a["id"] for a in await store.read("ses a")] == ["b", "c"]
