"""The deliverer: follows the logs for every active subscription and POSTs what matches,
signed with Standard Webhooks, while it holds the one `subscriptions` lease
(docs/subscriptions.md).

A cursor over the log, not a hook in the write path (the chat bridge's pattern): a scan
reads each session's actions past the subscription's cursor and records the matching ones
as pending deliveries together with the moved cursor (one unit, fenced by the lease), so a
crash loses nothing committed and records nothing twice. Sending is apart from scanning:
each due delivery is tried, and its try recorded (delivered; pending again after an
exponential backoff with jitter; failed after `SUBSCRIPTION_RETRY`'s tries, or at once for a
refused address; 410 Gone disables the subscription). Several processes may run one on
PostgreSQL; only the lease holder scans and sends, so each try is made once. A receiver
still dedupes by `webhook-id` (a holder killed after a send and before its record resends).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from opennua._common import RetryPolicy
from opennua.host import SessionStates
from opennua.protocol import SessionState, action_from_dict, initial_state, reduce
from opennua.store import (
    BehindSession,
    DeliveryState,
    EventDelivery,
    Fenced,
    LogStore,
    NotFound,
    RegistryStore,
    SchedulerLease,
    StoreError,
    SubscriptionRecord,
    SubscriptionStore,
    Watcher,
    WriteConflict,
)

from ._outbound import TIMEOUT, EgressRefused, Outbound, SendFailed
from ._service import SecretCache, Secrets
from ._webhooks import sign

log = logging.getLogger("opennua.automation.subscriptions")
#: Sessions scanned per subscription per tick.
PAGE = 100
#: Seconds a delivery is not due again once its try started: more than a try may take
#: (`_outbound.TIMEOUT`), so it is never tried twice at once.
CLAIM = TIMEOUT + 30.0


#: What a subscription of a format other than 'webhook' delivers, one session's actions
#: at a time: given the session's state where a scan starts, a step that takes each
#: action with the state just after it and answers the body to deliver for it (JSON
#: text) or None. Given by the server (the protocols are not the automation's to import).
RenderStep = Callable[[SessionState, Mapping[str, Any]], str | None]
Renderer = Callable[[SubscriptionRecord, SessionState], RenderStep]
#: Rendering states kept between scans, by (subscription, session).
RENDER_STATES = 256


class DelivererStore(SubscriptionStore, LogStore, RegistryStore, Protocol):
    """What the deliverer reads (the logs, deployments by digest) and records."""


#: About a day of tries: 5 s doubling to an hour, equal jitter, 30 tries.
SUBSCRIPTION_RETRY = RetryPolicy(base=5.0, cap=3600.0, max_attempts=30)


def event_id(action_id: str) -> str:
    """The `webhook-id` of an action's event: the same for every try, replay and
    subscription, so a receiver dedupes by it."""
    return "evt_" + action_id.removeprefix("act_")


def turn_outcome(state: dict[str, Any], turn_id: str | None) -> dict[str, Any] | None:
    """How a turn ended, as a receiver needs it without reading the session: its stop
    reason, error, structured result (`output`, when the plugin declares a schema), final
    answer (the last assistant message's text) and usage."""
    turn = next((t for t in state.get("turns", []) if t.get("turn_id") == turn_id), None)
    if turn is None:
        return None
    answer = None
    for item in turn.get("timeline", []):
        message = turn["messages"].get(item.get("id")) if item.get("kind") == "message" else None
        if message is not None and message.get("role") == "assistant":
            answer = message.get("text")
    return {
        "stop_reason": turn.get("stop_reason"),
        "error": turn.get("error"),
        "output": turn.get("output"),
        "answer": answer,
        "usage": turn.get("usage"),
    }


class Deliverer:
    def __init__(
        self,
        store: DelivererStore,
        secrets: Secrets,
        *,
        deliverer_id: str,
        outbound: Outbound | None = None,
        retry: RetryPolicy | None = None,
        ttl: float = 10.0,
        poll_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        concurrency: int = 64,
        per_subscription: int = 16,
        renderers: Mapping[str, Renderer] | None = None,
    ) -> None:
        self.store = store
        self.secrets = secrets
        self.deliverer_id = deliverer_id
        self.outbound = outbound or Outbound()
        self.retry = retry or SUBSCRIPTION_RETRY
        self.ttl = ttl
        self.poll = poll_interval
        self.clock = clock
        self._rng = rng or random.Random()
        self._limit = asyncio.Semaphore(16)  # scans at once
        self.concurrency = concurrency
        self.per_subscription = per_subscription
        #: Tries in flight, by (subscription, event): the loop never waits for one.
        self._inflight: dict[tuple[str, str], asyncio.Task[int]] = {}
        #: Set when a try ends: a slot is free for the next due delivery.
        self._kick = asyncio.Event()
        self._states = SessionStates(store)
        self.renderers = dict(renderers or {})
        #: Where each rendered subscription's scan of a session stopped: state and step.
        self._rendered: OrderedDict[tuple[str, str], tuple[SessionState, RenderStep]] = (
            OrderedDict()
        )
        self._stopping = asyncio.Event()
        self._signing = SecretCache()
        self._deployments: dict[str, str] = {}
        self.lease: SchedulerLease | None = None
        #: The last tick stopped at a page's end: there is more to do now.
        self._more = False
        #: The last tick found no active subscription and no try in flight: an append has
        #: nothing to match, so only the poll (or a kick) starts the next tick.
        self._idle = False

    async def run(self) -> None:
        """Until `shutdown()`: hold (or wait for) the lease; scan and send on every append
        and at least every `poll_interval` (a retry's time, another host's appends)."""
        watcher = self.store.watch()
        try:
            while not self._stopping.is_set():
                try:
                    self.lease = await self.store.acquire_delivery_lease(
                        self.deliverer_id, self.clock(), self.ttl
                    )
                    if self.lease is not None:
                        await self.tick(self.lease)
                        if self._more:
                            continue  # a full page: the rest at once, not after a poll
                except Fenced:
                    log.info("deliverer %s lost the lease", self.deliverer_id)
                    self.lease = None
                except StoreError:
                    log.warning("deliverer tick failed; retrying", exc_info=True)
                except Exception:
                    # A bug must not end deliveries for every subscription until a restart.
                    log.exception("deliverer tick failed unexpectedly; retrying")
                await self._wait(watcher)
        finally:
            watcher.close()
            await self._settle()
            if self.lease is not None:
                with contextlib.suppress(StoreError):
                    await self.store.release_delivery_lease(self.lease)
            await self.outbound.aclose()

    async def _settle(self, grace: float = 5.0) -> None:
        """At shutdown: let the tries in flight end for `grace` seconds, then cancel the
        rest (their claims lapse and the next holder tries them again)."""
        tasks = list(self._inflight.values())
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _wait(self, watcher: Watcher) -> None:
        """Until an append (unless idle), a kick, the stop or the poll interval. Idle, the
        appends are not waited for: a busy server ticked several times a second, each tick
        a lease write and two reads, with no subscription to match. A new subscription is
        scanned at the next poll; the watcher keeps at most one wake-up a session meanwhile."""
        self._kick.clear()
        stop = asyncio.ensure_future(self._stopping.wait())
        kicked = asyncio.ensure_future(self._kick.wait())
        waits: list[asyncio.Future[Any]] = [stop, kicked]
        if not self._idle:
            waits.append(asyncio.ensure_future(watcher.batch(10_000)))
        try:
            await asyncio.wait(waits, timeout=self.poll, return_when="FIRST_COMPLETED")
        finally:
            for task in waits:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def shutdown(self) -> None:
        """Stop after the current tick and hand the lease over at once. Idempotent."""
        self._stopping.set()

    async def tick(self, lease: SchedulerLease) -> list[asyncio.Task[int]]:
        """Scan every active subscription, then start tries for what is due, as far as
        free slots allow; returns the tries started (each ends with 1 if it delivered).
        The loop does not wait for them: a slow receiver holds up only its own slots.
        Raises `Fenced` once the lease is lost."""
        self._more = False
        active = {s.subscription_id: s for s in await self.store.list_subscriptions()}
        self._idle = not active and not self._inflight
        if self._idle:
            # Nothing to scan for, nothing to send: a due delivery of a deleted or paused
            # subscription is never picked.
            return []
        for subscription in active.values():
            behind = await self.store.sessions_behind(subscription, limit=PAGE)
            self._more |= len(behind) == PAGE
            # Concurrently: each session's unit is its own, and the store commits them
            # together (one fsync for the lot on SQLite's group commit).
            await asyncio.gather(*(self._scan(lease, subscription, b) for b in behind))
        free = self.concurrency - len(self._inflight)
        if free <= 0:
            return []
        due = await self.store.due_deliveries(self.clock(), limit=PAGE * 5)
        picked = self._pick([d for d in due if d.subscription_id in active], free, active)
        if not picked:
            return []
        # Claimed before they are sent: not due again while in flight (one unit).
        await self.store.claim_tries(lease, picked, self.clock() + CLAIM)
        started = []
        for delivery in picked:
            task = asyncio.create_task(self._try(lease, active[delivery.subscription_id], delivery))
            self._inflight[(delivery.subscription_id, delivery.event_id)] = task
            started.append(task)
        return started

    def _pick(
        self, due: list[EventDelivery], free: int, active: Mapping[str, SubscriptionRecord]
    ) -> list[EventDelivery]:
        """Up to `free` due deliveries not in flight, at most `per_subscription` in flight
        for any one subscription (so one slow receiver cannot take every slot). A rendered
        format's (an A2A task's pushes) go one at a time, lowest seq first, so a live
        receiver gets them in the task's order."""
        busy: dict[str, int] = {}
        for sub, _ in self._inflight:
            busy[sub] = busy.get(sub, 0) + 1
        # Stable: webhooks keep their oldest-first order; a task's pushes go by seq.
        due = sorted(
            due, key=lambda d: 0 if active[d.subscription_id].format == "webhook" else d.seq
        )
        picked = []
        for d in due:
            key = (d.subscription_id, d.event_id)
            limit = self.per_subscription if active[d.subscription_id].format == "webhook" else 1
            if key in self._inflight or busy.get(d.subscription_id, 0) >= limit:
                continue
            busy[d.subscription_id] = busy.get(d.subscription_id, 0) + 1
            picked.append(d)
            if len(picked) == free:
                break
        return picked

    async def _try(
        self, lease: SchedulerLease, subscription: SubscriptionRecord, delivery: EventDelivery
    ) -> int:
        try:
            return await self._send(lease, subscription, delivery)
        except Fenced:
            log.info("deliverer %s lost the lease mid-try", self.deliverer_id)
            return 0
        except Exception:
            # Its claim lapses and it is tried again; the loop goes on.
            log.exception("a try of %s failed unexpectedly", delivery.event_id)
            return 0
        finally:
            self._inflight.pop((delivery.subscription_id, delivery.event_id), None)
            self._kick.set()

    async def _scan(
        self, lease: SchedulerLease, subscription: SubscriptionRecord, behind: BehindSession
    ) -> None:
        async with self._limit:
            with contextlib.suppress(WriteConflict):  # a replay moved it: next tick
                await self._scan_session(lease, subscription, behind)

    async def _scan_session(
        self, lease: SchedulerLease, subscription: SubscriptionRecord, behind: BehindSession
    ) -> None:
        session_id, cursor, digest = behind.session_id, behind.cursor, behind.deployment_digest
        last_seq = behind.last_seq
        start = cursor or 0
        narrowed = subscription.deployment is not None
        if narrowed and await self._deployment_name(digest) != subscription.deployment:
            await self.store.record_scan(
                lease, subscription.subscription_id, session_id,
                expected=cursor, seq=last_seq, deliveries=(),
            )  # fmt: skip
            return
        actions = await self.store.read(session_id, start, 1000)
        if not actions:
            return
        if subscription.format == "webhook":
            wanted = [a for a in actions if a["type"] in subscription.events]
            payloads = [await self._payload(subscription, a, digest) for a in wanted]
        else:
            wanted, payloads = await self._render(subscription, session_id, start, actions)
        deliveries = []
        for action, payload in zip(wanted, payloads, strict=True):
            now = self.clock()
            deliveries.append(
                EventDelivery(
                    subscription_id=subscription.subscription_id,
                    event_id=event_id(action["id"]),
                    session_id=session_id,
                    seq=action["seq"],
                    event_type=action["type"],
                    payload=payload,
                    state="pending",
                    attempts=0,
                    next_at=now,
                    created_at=now,
                    updated_at=now,
                )
            )
        await self.store.record_scan(
            lease, subscription.subscription_id, session_id,
            expected=cursor, seq=actions[-1]["seq"], deliveries=deliveries,
        )  # fmt: skip

    async def _render(
        self,
        subscription: SubscriptionRecord,
        session_id: str,
        start: int,
        actions: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The actions a rendered format delivers and their bodies, each rendered from the
        session's state just after it (so a late scan still sends what each step was)."""
        renderer = self.renderers.get(subscription.format)
        if renderer is None:
            log.warning("no renderer for %s: nothing delivered", subscription.format)
            return [], []
        key = (subscription.subscription_id, session_id)
        kept = self._rendered.pop(key, None)
        if kept is None or kept[0]["seq"] != start:
            state = await self._fold_to(session_id, start)
            kept = (state, renderer(subscription, state))
        state, step = kept
        wanted, payloads = [], []
        for action in actions:
            state = reduce(state, action_from_dict(action))
            body = step(state, action) if action["type"] in subscription.events else None
            if body is not None:
                wanted.append(action)
                payloads.append(body)
        self._rendered[key] = (state, step)
        while len(self._rendered) > RENDER_STATES:
            self._rendered.popitem(last=False)
        return wanted, payloads

    async def _fold_to(self, session_id: str, seq: int) -> SessionState:
        state = initial_state()
        while state["seq"] < seq:
            page = await self.store.read(session_id, state["seq"], min(1000, seq - state["seq"]))
            if not page:
                break
            for raw in page:
                state = reduce(state, action_from_dict(raw))
        return state

    async def _payload(
        self, subscription: SubscriptionRecord, action: dict[str, Any], digest: str | None
    ) -> str:
        """The body every try of this event sends (Standard Webhooks' `type`, `timestamp`,
        `data`)."""
        data: dict[str, Any] = {
            "event_id": event_id(action["id"]),
            "subscription_id": subscription.subscription_id,
            "workspace_id": subscription.workspace_id,
            "session_id": action["session_id"],
            "deployment": await self._deployment_name(digest),
            "action": action,
        }
        if action["type"] == "turn.ended":
            state = await self._states.fold(action["session_id"])
            data["outcome"] = turn_outcome(dict(state), action.get("turn_id"))
        body = {"type": action["type"], "timestamp": action["ts"], "data": data}
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    async def _deployment_name(self, digest: str | None) -> str | None:
        if digest is None:
            return None
        name = self._deployments.get(digest)
        if name is None:
            try:
                name = (await self.store.get_deployment_config(digest)).name
            except NotFound:
                return None
            self._deployments[digest] = name
        return name

    async def _send(
        self, lease: SchedulerLease, subscription: SubscriptionRecord, delivery: EventDelivery
    ) -> int:
        # `subscription` as this tick read it: one deleted since has no row left to record
        # on (the update touches nothing), and a receiver may get one last try.
        try:
            secret = await self._secret(subscription, subscription.secret_name)
        except StoreError:
            raise  # the store, not the secret: the next tick tries again
        except Exception as exc:  # the secret is gone or unreadable: nothing can be signed
            unreadable = f"the signing secret cannot be read: {exc}"[:500]
            return await self._record(lease, delivery, "failed", None, unreadable)
        body = delivery.payload.encode()
        now = self.clock()
        headers = sign(secret, delivery.event_id, int(now), body)
        headers |= {"content-type": "application/json", "user-agent": "opennua-webhooks/1"}
        if subscription.token_secret is not None:
            # A2A's push sender sends the config's token back in this header.
            try:
                token = await self._secret(subscription, subscription.token_secret)
            except StoreError:
                raise
            except Exception as exc:
                unreadable = f"the notification token cannot be read: {exc}"[:500]
                return await self._record(lease, delivery, "failed", None, unreadable)
            headers["x-a2a-notification-token"] = token
        status: int | None = None
        disable = None
        try:
            status = await self.outbound.post(subscription.url, body, headers)
        except EgressRefused as exc:
            return await self._record(lease, delivery, "failed", None, str(exc))
        except SendFailed as exc:
            error: str | None = str(exc)[:500]
        else:
            error = None if 200 <= status < 300 else f"HTTP {status}"
        if status is not None and 200 <= status < 300:
            return await self._record(lease, delivery, "delivered", status, None)
        if status == 410:
            disable = "the receiver answered 410 Gone"
            return await self._record(lease, delivery, "failed", status, error, disable)
        attempts = delivery.attempts + 1
        if self.retry.gives_up(attempts):
            return await self._record(lease, delivery, "failed", status, error)
        next_at = self.clock() + self.retry.delay(attempts, self._rng.random())
        return await self._record(lease, delivery, "pending", status, error, next_at=next_at)

    async def _record(
        self,
        lease: SchedulerLease,
        delivery: EventDelivery,
        state: DeliveryState,
        status: int | None,
        error: str | None,
        disable: str | None = None,
        *,
        next_at: float | None = None,
    ) -> int:
        now = self.clock()
        if state != "delivered":
            log.info(
                "subscription %s: event %s %s (%s)",
                delivery.subscription_id, delivery.event_id, state, error,
            )  # fmt: skip
        await self.store.record_attempt(
            lease, delivery, state=state, next_at=now if next_at is None else next_at,
            status=status, error=error, now=now, disable=disable,
        )  # fmt: skip
        return 1 if state == "delivered" else 0

    async def _secret(self, subscription: SubscriptionRecord, name: str) -> str:
        """The subscription's secret `name` (its signing secret or its A2A token)."""
        return await self._signing.get(
            self.secrets, subscription.subscription_id, subscription.workspace_id, name
        )
