"""The roles of automation: schedules, webhooks and the scheduler lease
(`AutomationStore`), event subscriptions (`SubscriptionStore`); the rest are in `_roles`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from . import _automation as automation
from . import _subscriptions as subscriptions
from ._automation import (
    DeliveryRecord,
    FireRecord,
    HookRecord,
    RefusalRecord,
    ScheduleRecord,
    SchedulerLease,
)
from ._roles import Backend
from ._subscriptions import BehindSession, DeliveryState, EventDelivery, SubscriptionRecord
from ._unit import Unit


class AutomationStore(Backend, Protocol):
    """Schedules and their fires, webhooks and their deliveries, the scheduler lease."""

    async def create_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """:class:`WriteConflict` when the workspace has a schedule of that name."""
        result: ScheduleRecord = await self._one(automation.InsertSchedule(schedule))
        return result

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        return await self._read(automation.get_schedule(schedule_id))

    async def list_schedules(self, workspace_id: str | None = None) -> list[ScheduleRecord]:
        return await self._read(automation.list_schedules(workspace_id))

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, *, next_fire_at: float | None = None
    ) -> ScheduleRecord:
        """Pause (the next slot is kept), or resume at ``next_fire_at``."""
        result: ScheduleRecord = await self._one(
            automation.SetSchedulePaused(schedule_id, paused, next_fire_at)
        )
        return result

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._one(automation.DeleteSchedule(schedule_id))

    async def due_schedules(self, now: float, *, limit: int = 100) -> list[ScheduleRecord]:
        """Active schedules whose next slot is at or before ``now``, earliest first."""
        return await self._read(automation.due_schedules(now, limit))

    async def skip_slots(
        self, schedule_id: str, expected: float, next_fire_at: float | None, lease: SchedulerLease
    ) -> bool:
        """Move a schedule past slots it will not fire (misfires), fenced by ``lease``;
        False when the schedule moved on meanwhile."""
        results = await self._commit(
            Unit(
                None,
                (
                    automation.CheckSchedulerLease(lease.owner, lease.epoch),
                    automation.AdvanceSchedule(schedule_id, expected, next_fire_at),
                ),
            )
        )
        moved: bool = results[1]
        return moved

    async def record_refused_fire(
        self, fire: FireRecord, *, expected: float, next_fire_at: float | None
    ) -> None:
        """A slot that started nothing (``fire.refused_code`` says why) is a run too:
        recorded once, fenced by the scheduler lease it names, and the schedule moved on
        from ``expected`` in the same unit. ``WriteConflict`` if the slot was decided."""
        await self._commit(
            Unit(
                None,
                (
                    automation.CheckSchedulerLease(fire.scheduler_id, fire.epoch),
                    automation.InsertFire(fire),
                    automation.AdvanceSchedule(fire.schedule_id, expected, next_fire_at),
                ),
            )
        )

    async def list_fires(self, schedule_id: str, *, limit: int = 20) -> list[FireRecord]:
        """Newest first."""
        return await self._read(automation.list_fires(schedule_id, limit))

    async def acquire_scheduler_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None:
        """Take (epoch + 1) or renew the one scheduler lease; None while another holds it."""
        result: SchedulerLease | None = await self._one(
            automation.AcquireSchedulerLease(owner, now, ttl)
        )
        return result

    async def release_scheduler_lease(self, lease: SchedulerLease) -> None:
        await self._one(automation.ReleaseSchedulerLease(lease.owner, lease.epoch))

    async def get_scheduler_lease(self) -> SchedulerLease | None:
        return await self._read(automation.get_scheduler_lease())

    async def create_hook(self, hook: HookRecord) -> HookRecord:
        result: HookRecord = await self._one(automation.InsertHook(hook))
        return result

    async def get_hook(self, hook_id: str) -> HookRecord:
        return await self._read(automation.get_hook(hook_id))

    async def list_hooks(self, workspace_id: str | None = None) -> list[HookRecord]:
        return await self._read(automation.list_hooks(workspace_id))

    async def delete_hook(self, hook_id: str) -> None:
        await self._one(automation.DeleteHook(hook_id))

    async def record_refusal(self, refusal: RefusalRecord) -> None:
        """A delivery the hook refused (the hook's newest MAX_REFUSALS are kept)."""
        await self._one(automation.InsertRefusal(refusal))

    async def list_refusals(self, hook_id: str, *, limit: int = 20) -> list[RefusalRecord]:
        """Newest first."""
        return await self._read(automation.list_refusals(hook_id, limit))

    async def get_delivery(self, hook_id: str, delivery_id: str) -> DeliveryRecord | None:
        return await self._read(automation.get_delivery(hook_id, delivery_id))

    async def list_deliveries(self, hook_id: str, *, limit: int = 20) -> list[DeliveryRecord]:
        """Newest first."""
        return await self._read(automation.list_deliveries(hook_id, limit))


class SubscriptionStore(Backend, Protocol):
    """Event subscriptions, the cursors the deliverer follows the logs with, their
    deliveries and the deliverer's lease (docs/subscriptions.md)."""

    async def create_subscription(self, subscription: SubscriptionRecord) -> SubscriptionRecord:
        """The subscription, following its scope's sessions from their current end."""
        result: SubscriptionRecord = await self._one(subscriptions.InsertSubscription(subscription))
        return result

    async def get_subscription(self, subscription_id: str) -> SubscriptionRecord:
        return await self._read(subscriptions.get_subscription(subscription_id))

    async def list_subscriptions(self, workspace_id: str | None = None) -> list[SubscriptionRecord]:
        """A workspace's subscriptions; None: every active one (what the deliverer follows)."""
        return await self._read(subscriptions.list_subscriptions(workspace_id))

    async def delete_subscription(self, subscription_id: str) -> None:
        await self._one(subscriptions.DeleteSubscription(subscription_id))

    async def sessions_behind(
        self, subscription: SubscriptionRecord, *, limit: int = 100
    ) -> list[BehindSession]:
        """Sessions in the subscription's scope with actions past its cursor."""
        return await self._scan(subscriptions.sessions_behind(subscription, limit))

    async def record_scan(
        self,
        lease: SchedulerLease,
        subscription_id: str,
        session_id: str,
        *,
        expected: int | None,
        seq: int,
        deliveries: Sequence[EventDelivery],
    ) -> None:
        """Deliveries found in a session's log and its cursor moved from ``expected`` to
        ``seq``, in one unit fenced by the deliverer's lease (``Fenced`` once it is lost;
        ``WriteConflict`` if the cursor moved meanwhile)."""
        found = tuple(deliveries)
        scan = subscriptions.RecordScan(subscription_id, session_id, expected, seq, found)
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, scan)))

    async def due_deliveries(self, now: float, *, limit: int = 100) -> list[EventDelivery]:
        return await self._read(subscriptions.due_deliveries(now, limit))

    async def claim_tries(
        self, lease: SchedulerLease, deliveries: Sequence[EventDelivery], until: float
    ) -> None:
        """Tries are starting for ``deliveries``: none is due again before ``until``; one
        unit fenced by the deliverer's lease."""
        keys = tuple((v.subscription_id, v.event_id) for v in deliveries)
        claim = subscriptions.ClaimTries(keys, until)
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, claim)))

    async def record_attempt(
        self,
        lease: SchedulerLease,
        delivery: EventDelivery,
        *,
        state: DeliveryState,
        next_at: float,
        status: int | None,
        error: str | None,
        now: float,
        disable: str | None = None,
    ) -> None:
        """How a try of ``delivery`` ended, fenced by the deliverer's lease."""
        attempt = subscriptions.RecordAttempt(
            delivery.subscription_id, delivery.event_id, state, next_at, status, error, now, disable
        )
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, attempt)))

    async def list_event_deliveries(
        self, subscription_id: str, *, limit: int = 20
    ) -> list[EventDelivery]:
        """Newest first."""
        return await self._read(subscriptions.list_event_deliveries(subscription_id, limit))

    async def get_event_delivery(self, subscription_id: str, event_id: str) -> EventDelivery:
        return await self._read(subscriptions.get_event_delivery(subscription_id, event_id))

    async def replay_event(self, subscription_id: str, event_id: str, now: float) -> None:
        await self._one(subscriptions.ReplayEvent(subscription_id, event_id, now))

    async def replay_from(self, subscription_id: str, session_id: str, seq: int) -> None:
        await self._one(subscriptions.ReplayFrom(subscription_id, session_id, seq))

    async def acquire_delivery_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None:
        """Take (epoch + 1) or renew the one deliverer lease; None while another holds it."""
        result: SchedulerLease | None = await self._one(
            automation.AcquireSchedulerLease(owner, now, ttl, subscriptions.DELIVERY_LEASE)
        )
        return result

    async def release_delivery_lease(self, lease: SchedulerLease) -> None:
        await self._one(
            automation.ReleaseSchedulerLease(lease.owner, lease.epoch, subscriptions.DELIVERY_LEASE)
        )
