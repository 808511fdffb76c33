"""Event subscriptions in process: the deliverer against a real store (SQLite and
PostgreSQL) and a real HTTP receiver that verifies Standard Webhooks signatures; time is
a fake clock (started at the real time: receivers refuse a `webhook-timestamp` more than
5 minutes off). The same through `nua serve` processes: tests/e2e/test_subscriptions.py."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opennua.automation import (
    AutomationError,
    Deliverer,
    Outbound,
    RetryPolicy,
    Subscriptions,
    SubscriptionSpec,
    event_id,
    token_secret,
)
from opennua.automation._deliverer import turn_outcome
from opennua.protocol import action_id
from opennua.store import Fenced, NotFound, SchedulerLease

from ._receiver import Receiver, receiving
from .conftest import World, world


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def live(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    url = f"sqlite:///{tmp_path}/nua.db"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
    async with world(url, tmp_path, now=time.time()) as w:
        yield w


@pytest.fixture
async def sqlite_live(tmp_path: Path) -> AsyncIterator[World]:
    async with world(f"sqlite:///{tmp_path}/nua.db", tmp_path, now=time.time()) as w:
        yield w


@pytest.fixture
def receiver() -> Any:
    with receiving() as r:
        yield r


def subscriptions(w: World) -> Subscriptions:
    return Subscriptions(w.store, w.automation.secrets, clock=w.clock)


def deliverer(w: World, name: str = "dlv-a", **kw: Any) -> Deliverer:
    kw.setdefault("outbound", Outbound(allow_private=True))
    kw.setdefault("retry", RetryPolicy(base=10.0, cap=60.0, max_attempts=5))
    return Deliverer(
        w.store, w.automation.secrets, deliverer_id=name, clock=w.clock, rng=random.Random(7), **kw
    )


async def settle(d: Deliverer, lease: SchedulerLease) -> int:
    """One tick, and the tries it started to their end: how many delivered."""
    return sum(await asyncio.gather(*await d.tick(lease)))


_counter = iter(range(1_000_000))


async def new_session(w: World, *, digest: str | None = None) -> str:
    sid = f"ses_{next(_counter):026d}"
    await w.store.create_session(
        sid, created_at=w.clock(), workspace_id=w.workspace_id, deployment_digest=digest
    )
    return sid


async def rename(w: World, sid: str, title: str) -> str:
    """Commit one `session.updated` action; its id."""
    aid = action_id(sid, title)
    envelope = {"v": 1, "session_id": sid, "seq": 0, "id": aid, "type": "session.updated",
                "ts": "2026-12-06T09:00:00.000Z", "turn_id": None, "run_id": None,
                "client_id": None, "intent_id": None, "data": {"title": title}}  # fmt: skip
    await w.store.append(sid, [envelope])
    return aid


async def subscribe(w: World, receiver: Receiver, **kw: Any) -> str:
    spec = SubscriptionSpec(url=receiver.url, events=kw.pop("events", ["session.updated"]), **kw)
    created, secret = await subscriptions(w).create(w.workspace_id, w.owner_id, spec)
    receiver.secret = secret
    return created.subscription_id


async def test_what_is_committed_after_subscribing_is_delivered_signed(
    live: World, receiver: Receiver
) -> None:
    w = live
    before = await new_session(w)
    await rename(w, before, "old news")
    sub = await subscribe(w, receiver)
    after = await new_session(w)
    wanted = [await rename(w, before, "one"), await rename(w, after, "two")]
    d = deliverer(w)
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 10)
    assert lease is not None
    assert await settle(d, lease) == 2
    got = receiver.delivered()
    assert set(got) == {event_id(a) for a in wanted}
    assert all(p.verified for p in receiver.posts)
    payload = got[event_id(wanted[0])]
    assert payload["type"] == "session.updated"
    data = payload["data"]
    assert data["session_id"] == before and data["workspace_id"] == w.workspace_id
    assert data["subscription_id"] == sub and data["action"]["id"] == wanted[0]
    assert data["action"]["data"] == {"title": "one"}
    # Nothing twice: the cursor moved in the unit that recorded them.
    assert await settle(d, lease) == 0 and len(receiver.posts) == 2
    listed = await subscriptions(w).deliveries(sub)
    assert {(x.state, x.attempts, x.last_status) for x in listed} == {("delivered", 1, 200)}


async def test_a_failed_try_waits_its_backoff_then_delivers(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    sid = await new_session(w)
    await rename(w, sid, "retry me")
    receiver.answers = [500, 503]
    d = deliverer(w)
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    assert await settle(d, lease) == 0
    (pending,) = await w.store.list_event_deliveries(sub)
    assert (pending.state, pending.attempts, pending.last_status) == ("pending", 1, 500)
    # Equal jitter: between half and all of the base (10 s) for the first retry.
    assert w.clock() + 5 <= pending.next_at <= w.clock() + 10
    assert await settle(d, lease) == 0 and len(receiver.posts) == 1  # not due yet
    w.clock.now = pending.next_at
    assert await settle(d, lease) == 0
    (again,) = await w.store.list_event_deliveries(sub)
    # The second wait doubles: between 10 and 20 s.
    assert again.attempts == 2 and w.clock() + 10 <= again.next_at <= w.clock() + 20
    w.clock.now = again.next_at
    assert await settle(d, lease) == 1
    (done,) = await w.store.list_event_deliveries(sub)
    assert (done.state, done.attempts, done.last_status, done.last_error) == (
        "delivered", 3, 200, None,
    )  # fmt: skip
    # Every try carried the same webhook-id: a receiver dedupes them to one event.
    assert len({p.webhook_id for p in receiver.posts}) == 1 and len(receiver.posts) == 3


async def test_after_the_last_attempt_a_delivery_fails(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    await rename(w, await new_session(w), "never")
    receiver.answers = [500, 500]
    d = deliverer(w, retry=RetryPolicy(base=1.0, max_attempts=2))
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    await settle(d, lease)
    w.clock.now += 2
    await settle(d, lease)
    (failed,) = await w.store.list_event_deliveries(sub)
    assert (failed.state, failed.attempts, failed.last_error) == ("failed", 2, "HTTP 500")
    w.clock.now += 3600
    await settle(d, lease)
    assert len(receiver.posts) == 2


async def test_410_gone_disables_the_subscription(sqlite_live: World, receiver: Receiver) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    sid = await new_session(w)
    await rename(w, sid, "first")
    receiver.answers = [410]
    d = deliverer(w)
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    await settle(d, lease)
    found = await w.store.get_subscription(sub)
    assert found.disabled_at is not None and "410" in (found.disabled_reason or "")
    (gone,) = await w.store.list_event_deliveries(sub)
    assert (gone.state, gone.last_status) == ("failed", 410)
    await rename(w, sid, "second")
    w.clock.now += 3600
    await settle(d, lease)
    assert len(receiver.posts) == 1


async def test_a_private_address_is_refused_unless_allowed(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    await rename(w, await new_session(w), "leak")
    d = deliverer(w, outbound=Outbound(allow_private=False))
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    await settle(d, lease)
    (refused,) = await w.store.list_event_deliveries(sub)
    # Not worth a retry: the address will not become public.
    assert refused.state == "failed" and refused.attempts == 1
    assert "127.0.0.1 is not a public address" in (refused.last_error or "")
    assert receiver.posts == []


async def test_replay_sends_an_event_again_or_a_log_from_a_seq(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    sid = await new_session(w)
    first = await rename(w, sid, "a")
    await rename(w, sid, "b")
    d = deliverer(w)
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    assert await settle(d, lease) == 2
    service = subscriptions(w)
    await service.replay(sub, event_id=event_id(first))
    assert await settle(d, lease) == 1
    assert [p.webhook_id for p in receiver.posts][-1] == event_id(first)
    await service.replay(sub, from_seq=1, session_id=sid)
    assert await settle(d, lease) == 2
    # Five posts, two events: each replay kept its webhook-id.
    assert len(receiver.posts) == 5 and len(receiver.delivered()) == 2
    with pytest.raises(AutomationError) as unknown:
        await service.replay(sub, event_id="evt_nope")
    assert unknown.value.code == "not_found"
    with pytest.raises(AutomationError) as sessionless:
        await service.replay(sub, from_seq=1)
    assert sessionless.value.code == "validation_error"
    with pytest.raises(AutomationError) as elsewhere:
        await service.replay(sub, from_seq=1, session_id="ses_nope")
    assert elsewhere.value.code == "not_found"
    with pytest.raises(AutomationError) as both:
        await service.replay(sub, from_seq=1, event_id=event_id(first), session_id=sid)
    assert both.value.code == "validation_error"


async def test_a_subscription_narrowed_to_a_deployment_skips_other_sessions(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    default = await w.store.get_deployment("default")
    await subscribe(w, receiver, deployment="default")
    mine = await new_session(w, digest=default.digest)
    other = await new_session(w)
    wanted = await rename(w, mine, "mine")
    await rename(w, other, "not mine")
    d = deliverer(w)
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    assert await settle(d, lease) == 1
    (payload,) = receiver.delivered().values()
    assert payload["data"]["action"]["id"] == wanted
    assert payload["data"]["deployment"] == "default"
    # The other session's cursor moved on too: it is not read again.
    assert await w.store.sessions_behind(await w.store.get_subscription(
        payload["data"]["subscription_id"])) == []  # fmt: skip


async def test_what_a_subscription_may_name(sqlite_live: World) -> None:
    w = sqlite_live
    service = subscriptions(w)

    async def create(**kw: Any) -> str:
        spec = SubscriptionSpec(**{"url": "https://example.org/h", "events": ["turn.ended"], **kw})
        try:
            created, _ = await service.create(w.workspace_id, w.owner_id, spec)
        except AutomationError as exc:
            return exc.code
        return ",".join(created.events)

    assert await create(events=["turn.ended", "input.requested", "turn.ended"]) == (
        "turn.ended,input_request.opened"
    )
    assert await create(events=["turn.finished"]) == "invalid_subscription"
    assert await create(events=[]) == "invalid_subscription"
    assert await create(url="ftp://example.org/x") == "invalid_subscription"
    assert await create(url="https://user:pw@example.org/x") == "invalid_subscription"
    assert await create(url="/relative") == "invalid_subscription"
    assert await create(deployment="nope") == "not_found"
    assert await create(session_id="ses_nope") == "not_found"


async def test_one_deliverer_holds_the_lease_and_another_takes_over(
    live: World, receiver: Receiver
) -> None:
    """Two deliverers on one store (PostgreSQL: as two hosts would): each event is sent
    once; when the holder stops, the other goes on from the cursors."""
    w = live
    await subscribe(w, receiver)
    sid = await new_session(w)
    a = deliverer(w, "dlv-a", poll_interval=0.02, ttl=5.0)
    b = deliverer(w, "dlv-b", poll_interval=0.02, ttl=5.0)
    runs = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        first = [await rename(w, sid, f"t{i}") for i in range(5)]
        await asyncio.to_thread(receiver.wait, lambda r: len(r.posts) >= 5)
        await asyncio.sleep(0.2)
        assert len(receiver.posts) == 5
        holder, other = (a, b) if a.lease is not None else (b, a)
        assert other.lease is None
        await holder.shutdown()
        await runs[0 if holder is a else 1]
        later = [await rename(w, sid, f"u{i}") for i in range(3)]
        await asyncio.to_thread(receiver.wait, lambda r: len(r.posts) >= 8)
        await asyncio.sleep(0.2)
        assert other.lease is not None
        assert set(receiver.delivered()) == {event_id(x) for x in first + later}
        assert len(receiver.posts) == 8
    finally:
        await a.shutdown()
        await b.shutdown()
        await asyncio.gather(*runs)


async def test_with_no_subscription_appends_do_not_wake_the_deliverer(
    sqlite_live: World, receiver: Receiver
) -> None:
    """Idle (no subscription, no try in flight) only the poll starts a tick; once a
    subscription exists, every append does again. The polls here are a minute apart, so
    every tick counted below was started by the run's start or by an append."""
    w = sqlite_live
    sid = await new_session(w)

    async def counted_run(d: Deliverer) -> tuple[asyncio.Task[None], list[int]]:
        ticks = [0]
        tick = d.tick

        async def counting(lease: SchedulerLease) -> list[asyncio.Task[int]]:
            ticks[0] += 1
            return await tick(lease)

        d.tick = counting  # type: ignore[method-assign]
        task = asyncio.create_task(d.run())
        for _ in range(500):
            if ticks[0]:
                break
            await asyncio.sleep(0.01)
        assert ticks[0] == 1  # the tick at its start
        return task, ticks

    idle = deliverer(w, poll_interval=60.0)
    run, ticks = await counted_run(idle)
    for i in range(20):
        await rename(w, sid, f"unwatched {i}")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert ticks == [1]
    await idle.shutdown()
    await run

    await subscribe(w, receiver)
    busy = deliverer(w, poll_interval=60.0)
    run, ticks = await counted_run(busy)
    try:
        wanted = await rename(w, sid, "watched")
        await asyncio.to_thread(receiver.wait, lambda r: len(r.posts) >= 1)
        assert set(receiver.delivered()) == {event_id(wanted)}
        assert ticks[0] >= 2
    finally:
        await busy.shutdown()
        await run


async def test_pending_deliveries_survive_a_deliverer_that_died(
    sqlite_live: World, receiver: Receiver
) -> None:
    """The holder recorded a pending delivery and died holding the lease: after the lease
    expires the next deliverer sends it, once."""
    w = sqlite_live
    sub = await subscribe(w, receiver)
    sid = await new_session(w)
    await rename(w, sid, "pending")
    receiver.answers = [503]
    dead = deliverer(w, "dlv-dead")
    lease = await w.store.acquire_delivery_lease("dlv-dead", w.clock(), 10)
    assert lease is not None
    await settle(dead, lease)
    assert (await w.store.list_event_deliveries(sub))[0].state == "pending"
    heir = deliverer(w, "dlv-heir")
    assert await w.store.acquire_delivery_lease("dlv-heir", w.clock(), 10) is None
    w.clock.now += 60
    taken = await w.store.acquire_delivery_lease("dlv-heir", w.clock(), 10)
    assert taken is not None and taken.epoch == lease.epoch + 1
    assert await settle(heir, taken) == 1
    assert len(receiver.delivered()) == 1 and len(receiver.posts) == 2
    # Were the dead one only paused, what it would write now is fenced.
    await rename(w, sid, "later")
    with pytest.raises(Fenced):
        await dead.tick(lease)  # (its scan)


async def test_deleting_a_subscription_drops_what_it_owed(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    sub = await subscribe(w, receiver)
    await rename(w, await new_session(w), "x")
    service = subscriptions(w)
    await service.delete(sub)
    with pytest.raises(NotFound):
        await w.store.get_subscription(sub)
    assert await w.store.list_event_deliveries(sub) == []
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
    assert lease is not None
    assert await settle(deliverer(w), lease) == 0 and receiver.posts == []


async def test_a_lost_signing_secret_fails_its_deliveries_and_nothing_else(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    broken = await subscribe(w, receiver)
    record = await w.store.get_subscription(broken)
    await w.automation.secrets.delete(w.workspace_id, record.secret_name)
    with receiving() as other:
        fine = await subscribe(w, other)
        await rename(w, await new_session(w), "x")
        lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 3600)
        assert lease is not None
        assert await settle(deliverer(w), lease) == 1
        assert len(other.delivered()) == 1
    (failed,) = await w.store.list_event_deliveries(broken)
    assert failed.state == "failed" and "signing secret" in (failed.last_error or "")
    assert receiver.posts == []
    assert (await w.store.list_event_deliveries(fine))[0].state == "delivered"


def test_a_turns_outcome_carries_its_result_and_its_last_answer() -> None:
    turn = {
        "turn_id": "trn_1",
        "stop_reason": "end_turn",
        "error": None,
        "output": {"category": "bug", "severity": "high"},
        "usage": {"input_tokens": 3},
        "timeline": [
            {"kind": "message", "id": "msg_u"},
            {"kind": "tool_call", "id": "call_1"},
            {"kind": "message", "id": "msg_a1"},
            {"kind": "message", "id": "msg_a2"},
        ],
        "messages": {
            "msg_u": {"role": "user", "text": "hi"},
            "msg_a1": {"role": "assistant", "text": "looking"},
            "msg_a2": {"role": "assistant", "text": "done"},
        },
    }
    assert turn_outcome({"turns": [turn]}, "trn_1") == {
        "stop_reason": "end_turn",
        "error": None,
        "output": {"category": "bug", "severity": "high"},
        "answer": "done",
        "usage": {"input_tokens": 3},
    }
    assert turn_outcome({"turns": [turn]}, "trn_other") is None


async def test_a_slow_receiver_holds_up_only_its_own_deliveries(
    sqlite_live: World, receiver: Receiver
) -> None:
    w = sqlite_live
    receiver.delay = 2.0
    await subscribe(w, receiver)
    with receiving() as fast:
        await subscribe(w, fast)
        d = deliverer(w, poll_interval=0.05)
        run = asyncio.create_task(d.run())
        try:
            sid = await new_session(w)
            await rename(w, sid, "first")
            await asyncio.to_thread(fast.wait, lambda r: len(r.delivered()) == 1, 1.5)
            await rename(w, sid, "second")
            await asyncio.to_thread(fast.wait, lambda r: len(r.delivered()) == 2, 1.5)
            # Both reached the fast receiver while the slow one still held its first.
            assert receiver.posts == []
            await asyncio.to_thread(receiver.wait, lambda r: len(r.delivered()) == 2, 10)
        finally:
            await d.shutdown()
            await run


async def test_a_rendered_format_sends_each_step_of_the_state_with_its_token(
    live: World, receiver: Receiver
) -> None:
    """A format other than 'webhook' (an A2A push config, docs/protocols.md): each body
    from the state just after its action, even when one scan reads several; the token in
    `X-A2A-Notification-Token`, the signature keyed by it; one try at a time, in seq order."""
    w = live
    sid = await new_session(w)
    spec = SubscriptionSpec(
        url=receiver.url, events=["session.updated"], session_id=sid, format="titles",
        execution_id="exe_1", token="tok-123", origin="http://h",
    )  # fmt: skip
    with pytest.raises(AutomationError, match="not a public address"):
        await subscriptions(w).create(w.workspace_id, w.owner_id, spec)
    private = Subscriptions(w.store, w.automation.secrets, clock=w.clock, allow_private=True)
    created, secret = await private.create(w.workspace_id, w.owner_id, spec)
    assert secret == token_secret("tok-123")
    stored = await w.store.get_subscription(created.subscription_id)
    assert (stored.format, stored.execution_id, stored.origin) == ("titles", "exe_1", "http://h")
    assert stored.token_secret is not None
    receiver.secret = secret

    def titles(sub: Any, state: Any) -> Any:
        assert sub.execution_id == "exe_1"
        return lambda after, action: f'{{"title": "{after["title"]}"}}'

    for title in ("one", "two", "three"):
        await rename(w, sid, title)
    d = deliverer(w, renderers={"titles": titles})
    lease = await w.store.acquire_delivery_lease("dlv-a", w.clock(), 10)
    assert lease is not None
    while await settle(d, lease):
        pass
    assert [p.payload["title"] for p in receiver.posts] == ["one", "two", "three"]
    assert all(p.verified for p in receiver.posts)
    assert {p.headers["x-a2a-notification-token"] for p in receiver.posts} == {"tok-123"}
    await subscriptions(w).delete(created.subscription_id)
    assert not await w.automation.secrets.delete(w.workspace_id, stored.token_secret)
