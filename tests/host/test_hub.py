from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from opennua.host import Frame, Hub
from opennua.store import SessionRecord


class FakeLog:
    """A session log in memory with the store's read contract (after exclusive, limit)."""

    def __init__(self) -> None:
        self.actions: dict[str, list[dict[str, Any]]] = {}
        self.reads = 0
        self.wakeups: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    def append(self, session_id: str, count: int, size: int = 10) -> None:
        log = self.actions.setdefault(session_id, [])
        for _ in range(count):
            log.append({"seq": len(log) + 1, "type": "message.delta", "data": "x" * size})
        self.wakeups.put_nowait((session_id, len(log)))

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        self.reads += 1
        return self.actions.get(session_id, [])[after : after + limit]

    async def get_session(self, session_id: str) -> SessionRecord:
        head = len(self.actions.get(session_id, []))
        return SessionRecord(session_id=session_id, created_at=0.0, last_seq=head)

    async def stream(self):  # type: ignore[no-untyped-def]
        while True:
            yield await self.wakeups.get()


async def _take(iterator: Any, count: int) -> list[Frame]:
    frames = []
    async for frame in iterator:
        frames.append(frame)
        if len(frames) == count:
            break
    return frames


async def test_catch_up_then_live_in_order_without_gaps() -> None:
    log = FakeLog()
    log.append("s", 1200)
    hub = Hub(log, ring_size=100)
    follower = asyncio.create_task(hub.follow(log.stream()))
    async with hub.subscribe("s", after=5) as subscription:
        log.append("s", 30)
        frames = await asyncio.wait_for(_take(subscription, 1225), 5)
    follower.cancel()
    assert [frame.seq for frame in frames] == list(range(6, 1231))
    assert all(frame.kind == "action" for frame in frames)


async def test_late_subscriber_reads_history_from_the_store_and_recent_from_the_ring() -> None:
    log = FakeLog()
    hub = Hub(log, ring_size=50)
    log.append("s", 10)
    async with hub.subscribe("s", after=0) as first:
        assert [f.seq for f in await _take(first, 10)] == list(range(1, 11))
        log.append("s", 200)
        await hub.notify("s")
        async with hub.subscribe("s", after=3) as second:
            frames = await asyncio.wait_for(_take(second, 207), 5)
    assert [f.seq for f in frames] == list(range(4, 211))


async def test_a_stalled_subscriber_is_dropped_with_one_resync_and_bounded_memory() -> None:
    log = FakeLog()
    hub = Hub(log, max_actions=100, max_bytes=1 << 20)
    async with hub.subscribe("s", after=0) as stalled, hub.subscribe("s", after=0) as live:
        log.append("s", 500)
        await hub.notify("s")
        frames, size = stalled.queued
        assert frames <= 101 and size <= 1 << 20
        got = await asyncio.wait_for(_take(stalled, 10), 1)
        assert got == [Frame("resync", 101)]
        assert hub.stats.resyncs == 2  # both overflowed: neither read while 500 arrived
    async with hub.subscribe("s", after=0) as fresh:
        assert [f.seq for f in await _take(fresh, 500)] == list(range(1, 501))
    assert live is not None


async def test_byte_bound_triggers_resync_too() -> None:
    log = FakeLog()
    hub = Hub(log, max_actions=1000, max_bytes=10_000)
    async with hub.subscribe("s", after=0) as subscription:
        log.append("s", 20, size=1000)
        await hub.notify("s")
        assert subscription.queued[1] == 0
        frames = await _take(subscription, 1)
    assert frames[0].kind == "resync"


async def test_publishing_never_waits_for_a_subscriber() -> None:
    log = FakeLog()
    hub = Hub(log, max_actions=10)
    async with hub.subscribe("s", after=0):
        for _ in range(100):
            log.append("s", 5)
            await asyncio.wait_for(hub.notify("s"), 0.5)
    assert hub.subscriber_count == 0


async def test_a_stored_lone_surrogate_is_sent_escaped_not_raw() -> None:
    log = FakeLog()
    log.actions["s"] = [{"seq": 1, "type": "message.delta", "data": "bad \udc80 text"}]
    hub = Hub(log)
    async with hub.subscribe("s", after=0) as subscription:
        (frame,) = await asyncio.wait_for(_take(subscription, 1), 1)
    frame.json.encode("utf-8")  # every transport encodes it as UTF-8
    assert "\\udc80" in frame.json
    assert json.loads(frame.json)["data"] == "bad \udc80 text"


@pytest.mark.parametrize(
    "data",
    [
        {"text": "naïve 日本 ✓", "ratio": 0.1, "n": 7},  # UTF-8 as it is, not escaped
        {"n": 2**70, "text": "é"},  # past 64 bits: the standard library's path
    ],
)
async def test_a_frame_is_the_action_as_json_whatever_its_values(data: dict[str, Any]) -> None:
    log = FakeLog()
    log.actions["s"] = [{"seq": 1, "type": "x.y", "data": data}]
    hub = Hub(log)
    async with hub.subscribe("s", after=0) as subscription:
        (frame,) = await asyncio.wait_for(_take(subscription, 1), 1)
    assert json.loads(frame.json) == {"seq": 1, "type": "x.y", "data": data}
    if data["n"] == 7:
        assert "日本" in frame.json


class _GatedLog(FakeLog):
    """A log whose reads wait at a gate: an append can land while the Hub is mid-read."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.reading = asyncio.Event()

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        page = await super().read(session_id, after, limit)  # what the read saw: before the gate
        self.reading.set()
        await self.gate.wait()
        return page


async def test_an_append_during_the_hubs_read_is_delivered_without_another_wakeup() -> None:
    # Found by benchmarks/scale.py at 100 sessions: a wake-up that came while the Hub's
    # read was in flight was dropped, and a turn's last action (turn.ended) never reached
    # its stream, so its client waited forever.
    log = _GatedLog()
    log.append("s", 1)
    hub = Hub(log, coalesce_seconds=0)
    follower = asyncio.create_task(hub.follow(log.stream()))
    async with hub.subscribe("s", after=0) as subscription:
        frames = aiter(subscription)  # one iterator: each new one starts from the history
        assert (await anext(frames)).seq == 1
        log.gate.clear()
        log.reading.clear()
        log.append("s", 1)  # wake-up 2: the Hub reads, and its read waits at the gate
        await asyncio.wait_for(log.reading.wait(), 5)
        log.append("s", 1)  # wake-up 3 arrives mid-read; the read already saw the log
        await asyncio.sleep(0.05)  # the follower takes wake-up 3 while the read waits
        log.gate.set()
        later = [await asyncio.wait_for(anext(frames), 5) for _ in range(2)]
    follower.cancel()
    assert [f.seq for f in later] == [2, 3]


async def test_what_this_process_committed_is_delivered_without_reading_it_back() -> None:
    log = FakeLog()
    log.append("s", 3)
    hub = Hub(log)
    async with hub.subscribe("s", after=0) as subscription:
        stream = subscription.batches(heartbeat=0.05)
        assert [f.seq for f in await anext(stream)] == [1, 2, 3]
        reads = log.reads
        log.append("s", 2)  # committed here: handed over as they are
        await hub.publish("s", log.actions["s"][3:5])
        assert [f.seq for f in await anext(stream)] == [4, 5]
        assert log.reads == reads
        # Another writer's action came between: what this process hands over does not
        # continue the channel, so the Hub reads up to the log's end instead.
        log.append("s", 2)
        await hub.publish("s", log.actions["s"][6:7])
        assert [f.seq for f in await anext(stream)] == [6, 7]
        assert log.reads == reads + 1
        # Already delivered (by the store's wake-up, say): nothing twice, nothing read.
        await hub.publish("s", log.actions["s"][5:7])
        assert log.reads == reads + 1
