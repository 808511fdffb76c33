"""SessionStates: the folded-state cache and the snapshot policy, over a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opennua.host._states import SessionStates
from opennua.protocol import action_from_dict, replay, state_from_json, state_to_json
from opennua.store import NotFound, Snapshot, Store, open_store
from opennua.store._watch import WatchHub
from tests.conformance.authoring import Log


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as s:
        yield s


def _action(sid: str, n: int, type_: str = "test.filler", **extra: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "session_id": sid,
        "id": f"act_{sid}_{n}",
        "type": type_,
        "ts": "2027-01-15T08:00:00.000Z",
        "data": {},
        **extra,
    }


async def _session(store: Store, sid: str, actions: int) -> None:
    await store.create_session(sid, created_at=0.0, title=sid)
    created = _action(sid, 0, "session.created")
    created["data"] = {"title": sid, "principal_id": "prn_owner", "metadata": {}}
    await store.append(sid, [created, *(_action(sid, n) for n in range(1, actions))])


def _count_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """`(session_id, after)` of every `store.read` from now on."""
    reads: list[tuple[str, int]] = []
    read = store.read

    async def counted(session_id: str, after: int = 0, limit: int = 1000) -> Any:
        reads.append((session_id, after))
        return await read(session_id, after, limit)

    monkeypatch.setattr(store, "read", counted)
    return reads


async def _replayed(store: Store, sid: str) -> str:
    return state_to_json(replay(action_from_dict(a) for a in await store.read(sid, 0, 100_000)))


async def test_snapshots_follow_the_policy_and_a_cold_cache_starts_from_them(store: Store) -> None:
    await _session(store, "ses_a", 30)
    states = SessionStates(store, snapshot_every=10)
    seq, _ = await states.snapshot("ses_a")
    assert seq == 30 and (await store.get_snapshot("ses_a")).seq == 30  # type: ignore[union-attr]
    await store.append("ses_a", [_action("ses_a", n) for n in range(30, 35)])
    assert (await states.snapshot_json("ses_a"))[0] == 35
    assert (await store.get_snapshot("ses_a")).seq == 30  # type: ignore[union-attr]  # 5 < 10
    await store.append("ses_a", [_action("ses_a", n) for n in range(35, 45)])
    seq, state_json = await states.snapshot_json("ses_a")
    assert seq == 45 and (await store.get_snapshot("ses_a")).seq == 45  # type: ignore[union-attr]
    assert state_json == await _replayed(store, "ses_a")
    # A fresh cache reads the stored snapshot and reduces only the tail after it.
    await store.append("ses_a", [_action("ses_a", 45)])
    reads: list[int] = []
    real = store.read

    async def counting(session_id: str, after: int = 0, limit: int = 1000) -> Any:
        reads.append(after)
        return await real(session_id, after, limit)

    store.read = counting  # type: ignore[method-assign]
    cold = SessionStates(store, snapshot_every=10)
    assert (await cold.snapshot_json("ses_a")) == (46, await _replayed(store, "ses_a"))
    assert reads[0] == 45


async def test_a_turn_end_stores_a_snapshot_at_once(store: Store) -> None:
    await _session(store, "ses_t", 3)
    states = SessionStates(store, snapshot_every=500)
    await states.snapshot("ses_t")
    assert (await store.get_snapshot("ses_t")) is None
    ended = _action("ses_t", 3, "turn.ended", turn_id="trn_x")
    ended["data"] = {"stop_reason": "end_turn"}
    await store.append("ses_t", [ended])
    await states.fold("ses_t")
    assert (await store.get_snapshot("ses_t")).seq == 4  # type: ignore[union-attr]


async def test_a_long_sessions_turn_ends_wait_for_a_twentieth_of_growth(store: Store) -> None:
    # Storing the state costs all of it: at every turn end of a long session, each turn
    # paid the session's whole history again.
    await _session(store, "ses_l", 2000)
    states = SessionStates(store, snapshot_every=500)

    def turn(first: int, count: int, turn_id: str) -> list[dict[str, Any]]:
        ended = _action("ses_l", first + count - 1, "turn.ended", turn_id=turn_id)
        ended["data"] = {"stop_reason": "end_turn"}
        return [*(_action("ses_l", first + n) for n in range(count - 1)), ended]

    await store.append("ses_l", turn(2000, 1, "trn_1"))
    await states.fold("ses_l")
    assert (await store.get_snapshot("ses_l")).seq == 2001  # type: ignore[union-attr]
    for n in range(3):  # three turns of 20 actions: 60 < 2,001 / 20
        await store.append("ses_l", turn(2001 + 20 * n, 20, f"trn_{n + 2}"))
        await states.fold("ses_l")
    assert (await store.get_snapshot("ses_l")).seq == 2001  # type: ignore[union-attr]
    # The twentieth is reached in a fold that holds no turn end: the ones before count.
    await store.append("ses_l", [_action("ses_l", 2061 + n) for n in range(40)])
    assert (await states.snapshot_json("ses_l"))[0] == 2101  # 100 * 20 < 2,001
    assert (await store.get_snapshot("ses_l")).seq == 2001  # type: ignore[union-attr]
    await store.append("ses_l", [_action("ses_l", 2101)])
    seq, state_json = await states.snapshot_json("ses_l")
    assert seq == 2102 and (await store.get_snapshot("ses_l")).seq == 2102  # type: ignore[union-attr]
    assert state_json == await _replayed(store, "ses_l")


async def test_the_cache_is_bounded_and_callers_get_their_own_copy(store: Store) -> None:
    for sid in ("ses_1", "ses_2", "ses_3"):
        await _session(store, sid, 2)
    states = SessionStates(store, max_sessions=2)
    for sid in ("ses_1", "ses_2", "ses_3"):
        await states.snapshot(sid)
    assert len(states) == 2
    _, mine = await states.snapshot("ses_3")
    mine["title"] = "changed by a caller"
    _, again = await states.snapshot("ses_3")
    assert again["title"] == "ses_3"


async def test_unknown_sessions_raise_and_leave_nothing_behind(store: Store) -> None:
    states = SessionStates(store)
    with pytest.raises(NotFound):
        await states.snapshot("ses_missing")
    assert len(states) == 0 and not states._locks


async def test_keep_snapshots_folds_a_session_that_grew_past_the_policy(store: Store) -> None:
    await _session(store, "ses_k", 1)
    states = SessionStates(store, snapshot_every=5)
    watcher = store.watch()
    keeper = asyncio.ensure_future(states.keep_snapshots(watcher))
    try:
        await store.append("ses_k", [_action("ses_k", n) for n in range(1, 8)])
        snapshot = await _stored(store, "ses_k")
        assert snapshot is not None and snapshot.seq == 8
        assert not keeper.done()
    finally:
        watcher.close()
        await asyncio.wait_for(keeper, 5)  # a closed watcher ends the keeper


async def test_keep_snapshots_leaves_an_unread_session_alone_until_a_snapshot_is_due(
    store: Store,
) -> None:
    await _session(store, "ses_read", 3)
    states = SessionStates(store, snapshot_every=5)
    await states.snapshot("ses_read")  # a client reads this one: it is cached
    watcher = store.watch()
    keeper = asyncio.ensure_future(states.keep_snapshots(watcher))
    try:
        # Woken together: a webhook's new sessions (created, queued) and the cached one.
        for n in range(20):
            await _session(store, f"ses_new{n}", 3)
        await store.append("ses_read", [_action("ses_read", 3)])
        for _ in range(100):
            if states._states["ses_read"].state["seq"] == 4:
                break
            await asyncio.sleep(0.02)
        assert states._states["ses_read"].state["seq"] == 4  # a cached one keeps up
        assert not any(sid.startswith("ses_new") for sid in states._states)  # none due
        assert await store.get_snapshot("ses_new0") is None
        for n in (0, 7):
            ended = _action(f"ses_new{n}", 3, "turn.ended", turn_id="trn_x")
            ended["data"] = {"stop_reason": "end_turn"}
            await store.append(f"ses_new{n}", [ended])
        for n in (0, 7):
            snapshot = await _stored(store, f"ses_new{n}")
            assert snapshot is not None and snapshot.seq == 4  # the turn ended: stored
            stored = state_to_json(state_from_json(snapshot.state_json))
            assert stored == await _replayed(store, f"ses_new{n}")
        assert await store.get_snapshot("ses_new1") is None
    finally:
        keeper.cancel()
        watcher.close()


async def _stored(store: Store, session_id: str) -> Snapshot | None:
    for _ in range(100):
        snapshot = await store.get_snapshot(session_id)
        if snapshot is not None:
            return snapshot
        await asyncio.sleep(0.02)
    return None


async def test_advance_folds_committed_actions_the_next_fold_does_not_read_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Host folds what this process's Supervisor committed as handed over; only the
    log's tail after them is read. Actions that do not continue the state are left to
    the next fold, which reads them."""
    states = SessionStates(store)
    await _session(store, "ses_adv", 3)
    await _session(store, "ses_gap", 3)
    for sid in ("ses_adv", "ses_gap"):
        await states.fold(sid)
        await store.append(sid, [_action(sid, n) for n in (3, 4, 5)])
    handed = await store.read("ses_adv", 3)  # what the committing unit hands over
    gap = (await store.read("ses_gap", 3))[1:]  # seq 5 onwards: 4 is missing

    reads = _count_reads(store, monkeypatch)
    await states.advance("ses_adv", handed)
    await states.advance("ses_gap", gap)
    assert reads == []
    assert (await states.fold("ses_adv"))["seq"] == 6
    assert (await states.fold("ses_gap"))["seq"] == 6
    assert reads == [("ses_adv", 6), ("ses_gap", 3)]


@pytest.mark.parametrize(
    "metadata",
    [
        {"ratio": 1.0, "tiny": 1e-7, "huge": 1e300, "nested": [{"x": -0.5}]},
        {"past_64_bits": 2**70, "ratio": 2.5},  # orjson refuses it: the canonical writer
    ],
)
async def test_a_stored_snapshot_reads_back_as_the_state_it_was(
    store: Store, metadata: dict[str, Any]
) -> None:
    await store.create_session("ses_f", created_at=0.0, title="f")
    created = _action("ses_f", 0, "session.created")
    created["data"] = {"title": "f", "principal_id": "prn_owner", "metadata": metadata}
    ended = _action("ses_f", 1, "turn.ended", turn_id="trn_x")
    ended["data"] = {"stop_reason": "end_turn"}
    await store.append("ses_f", [created, ended])
    await SessionStates(store).snapshot("ses_f")
    assert (await store.get_snapshot("ses_f")).seq == 2  # type: ignore[union-attr]
    cold = SessionStates(store)  # starts from the stored snapshot, no action to reduce
    seq, state_json = await cold.snapshot_json("ses_f")
    assert (seq, state_json) == (2, await _replayed(store, "ses_f"))
    assert (await cold.snapshot("ses_f"))[1]["metadata"] == metadata


async def test_the_keeper_does_not_read_back_a_wake_up_advance_folded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit this process committed wakes the keeper too; the Host folded it already
    (`advance`), so the keeper's fold reads nothing. A wake-up past the cache is read."""
    await _session(store, "ses_w", 3)
    states = SessionStates(store)
    await states.fold("ses_w")
    await store.append("ses_w", [_action("ses_w", n) for n in (3, 4)])
    handed = await store.read("ses_w", 3)  # what the committing unit hands over
    reads = _count_reads(store, monkeypatch)
    wakeups = WatchHub()  # the store's own would wake the keeper before `advance` ran
    watcher = wakeups.subscribe()
    keeper = asyncio.ensure_future(states.keep_snapshots(watcher))
    try:
        await states.advance("ses_w", handed)
        wakeups.publish({"ses_w": 5})
        await store.append("ses_w", [_action("ses_w", 5)])  # not handed over
        wakeups.publish({"ses_w": 6})
        for _ in range(100):
            if states._states["ses_w"].state["seq"] == 6:
                break
            await asyncio.sleep(0.02)
        assert states._states["ses_w"].state["seq"] == 6
        assert reads == [("ses_w", 5)]
    finally:
        keeper.cancel()
        watcher.close()


@pytest.mark.parametrize("path", ["fold", "advance"])
async def test_a_late_action_on_an_old_turn_is_in_the_next_stored_snapshot(
    store: Store, path: str
) -> None:
    """A long state's snapshot keeps the text of turns no action named since the last one
    (`opennua.host._snapshot_text`): a late action on an ended turn, folded from the log or
    handed over by this process's Supervisor, is in the next stored snapshot."""
    log = Log("ses_big")
    log.session()
    for n in range(10):  # ~9 KB a turn: past what a Host keeps turn texts for
        turn = f"trn_{n}"
        log.turn(turn)
        log.start(turn)
        log.tool(turn, "run_root", f"call_{n}")
        log.tool_done(turn, "run_root", f"call_{n}", output="x" * 8_000)
        log.end(turn)
    await store.create_session("ses_big", created_at=0.0, title="big")
    await store.append("ses_big", [{k: v for k, v in a.items() if k != "seq"} for a in log.actions])
    states = SessionStates(store)
    await states.fold("ses_big")
    assert (await store.get_snapshot("ses_big")).seq == len(log.actions)  # type: ignore[union-attr]

    mark = len(log.actions)
    log.usage("trn_0", "run_root", n=7)  # names the first turn, long ended
    log.turn("trn_10")
    log.start("trn_10")
    log.end("trn_10")
    later = [{k: v for k, v in a.items() if k != "seq"} for a in log.actions[mark:]]
    seqs = await store.append("ses_big", later)
    if path == "advance":
        await states.advance("ses_big", [{**a, "seq": s} for a, s in zip(later, seqs, strict=True)])
    await states.fold("ses_big")
    stored = await store.get_snapshot("ses_big")
    assert stored is not None and stored.seq == len(log.actions)
    assert state_to_json(state_from_json(stored.state_json)) == await _replayed(store, "ses_big")
    assert state_from_json(stored.state_json)["turns"][0]["usage"]["input_tokens"] > 0
