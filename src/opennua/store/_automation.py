"""Automation's records, write programs and reads: schedules and their fires, webhooks and
their deliveries, and the scheduler's lease (docs/automation.md).

A fire is keyed by ``(schedule_id, fire_at)`` and a delivery by ``(hook_id, delivery_id)``;
each is written in the unit that accepts the execution it started, so "one run per slot"
and "one run per delivery" are facts of the store, not of a process. Only the holder of
the scheduler lease fires: :class:`CheckSchedulerLease` in a unit is its fence, the same
rule as an execution's epoch (a unit written under a stale epoch writes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._errors import Fenced, NotFound, WriteConflict
from ._sql import Columns, Dialect, Effects, Op, Program, Query

SCHEDULER_LEASE = "scheduler"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    schedule_id: str
    workspace_id: str
    name: str
    cron: str
    timezone: str
    deployment: str
    prompt: str
    misfire: str
    created_by: str
    created_at: float
    session_id: str | None = None
    paused: bool = False
    next_fire_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FireRecord:
    """A slot decided: the turn it started, or (`refused_code` set) why it started none."""

    schedule_id: str
    fire_at: float
    fired_at: float
    session_id: str | None
    turn_id: str | None
    execution_id: str | None
    scheduler_id: str
    epoch: int
    refused_code: str | None = None
    refused_detail: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookRecord:
    hook_id: str
    workspace_id: str
    name: str
    deployment: str
    prompt: str
    secret_name: str
    max_bytes: int
    created_by: str
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRecord:
    hook_id: str
    delivery_id: str
    body_sha256: str
    received_at: float
    session_id: str
    turn_id: str
    execution_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusalRecord:
    """A delivery a hook refused: when, the problem code, the ``webhook-id`` as sent
    (unverified when the signature was the problem) and the body's size, never the body."""

    hook_id: str
    refused_at: float
    code: str
    delivery_id: str | None
    body_bytes: int


#: How many refusals a hook keeps (the newest): a sender that is refused in a loop
#: cannot grow the table.
MAX_REFUSALS = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerLease:
    owner: str
    epoch: int
    expires_at: float
    #: Which lease: the scheduler's, or another single-holder loop's (the subscription
    #: deliverer's) kept in the same table.
    name: str = SCHEDULER_LEASE


# -- row mapping ---------------------------------------------------------------------------

_SCHEDULE_COLS = Columns(ScheduleRecord, decode={"paused": bool})
_FIRE_COLS = Columns(FireRecord)
_HOOK_COLS = Columns(HookRecord)
_DELIVERY_COLS = Columns(DeliveryRecord)
_REFUSAL_COLS = Columns(RefusalRecord)
_LEASE_COLS = Columns(SchedulerLease)


# -- schedules -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertSchedule(Op):
    schedule: ScheduleRecord

    def run(self, d: Dialect, fx: Effects) -> Program[ScheduleRecord]:
        s = self.schedule
        exists = WriteConflict("schedule", s.name, "already exists in this workspace")
        return (yield from _SCHEDULE_COLS.insert_new("schedules", s, exists, paused=int(s.paused)))


@dataclass(frozen=True, slots=True)
class SetSchedulePaused(Op):
    """Pause, or resume from ``next_fire_at`` (the slot after now: nothing is caught up)."""

    schedule_id: str
    paused: bool
    next_fire_at: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[ScheduleRecord]:
        current = yield from get_schedule(self.schedule_id)
        next_fire_at = current.next_fire_at if self.paused else self.next_fire_at
        yield Query(
            "UPDATE schedules SET paused = ?, next_fire_at = ? WHERE schedule_id = ?",
            (int(self.paused), next_fire_at, self.schedule_id),
        )
        return replace(current, paused=self.paused, next_fire_at=next_fire_at)


@dataclass(frozen=True, slots=True)
class DeleteSchedule(Op):
    """The schedule goes; its fires stay (they name runs that happened)."""

    schedule_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "DELETE FROM schedules WHERE schedule_id = ? RETURNING schedule_id",
            (self.schedule_id,),
        )
        if not rows:
            raise NotFound("schedule", self.schedule_id)


@dataclass(frozen=True, slots=True)
class CheckSchedulerLease(Op):
    """The scheduler's fence: void the unit unless ``owner`` still holds the lease at
    ``epoch`` (on PostgreSQL the row is locked, so a takeover waits for this unit)."""

    owner: str
    epoch: int
    name: str = SCHEDULER_LEASE

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            f"SELECT owner, epoch FROM scheduler_leases WHERE name = ?{d.lock_row}",
            (self.name,),
        )
        if not rows or rows[0][0] != self.owner or rows[0][1] != self.epoch:
            current = rows[0][1] if rows else None
            raise Fenced(self.name, self.epoch, current, "taken over")


@dataclass(frozen=True, slots=True)
class AdvanceSchedule(Op):
    """Move a schedule's next slot on, only from the slot the scheduler read (so two
    decisions about one slot cannot both advance it)."""

    schedule_id: str
    expected: float
    next_fire_at: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            "UPDATE schedules SET next_fire_at = ? WHERE schedule_id = ? AND next_fire_at = ? "
            "RETURNING schedule_id",
            (self.next_fire_at, self.schedule_id, self.expected),
        )
        return bool(rows)


@dataclass(frozen=True, slots=True)
class InsertFire(Op):
    """One fire per slot: a second for the same slot voids its unit (``WriteConflict``)."""

    fire: FireRecord

    def run(self, d: Dialect, fx: Effects) -> Program[FireRecord]:
        f = self.fire
        exists = WriteConflict("schedule fire", f"{f.schedule_id}@{f.fire_at}", "already fired")
        return (yield from _FIRE_COLS.insert_new("schedule_fires", f, exists))


@dataclass(frozen=True, slots=True)
class AcquireSchedulerLease(Op):
    """Take the lease if it is free or expired (epoch + 1), renew it if ``owner`` holds it
    (same epoch); None when someone else holds it."""

    owner: str
    now: float
    ttl: float
    name: str = SCHEDULER_LEASE

    def run(self, d: Dialect, fx: Effects) -> Program[SchedulerLease | None]:
        yield Query(
            "INSERT INTO scheduler_leases (name, owner, epoch, expires_at) VALUES (?, '', 0, 0) "
            "ON CONFLICT DO NOTHING",
            (self.name,),
        )
        rows = yield Query(
            f"SELECT owner, epoch, expires_at FROM scheduler_leases WHERE name = ?{d.lock_row}",
            (self.name,),
        )
        owner, epoch, expires_at = rows[0]
        if owner == self.owner and expires_at > self.now:
            new_epoch = epoch
        elif expires_at <= self.now:
            new_epoch = epoch + 1
        else:
            return None
        expires = self.now + self.ttl
        yield Query(
            "UPDATE scheduler_leases SET owner = ?, epoch = ?, expires_at = ? WHERE name = ?",
            (self.owner, new_epoch, expires, self.name),
        )
        return SchedulerLease(owner=self.owner, epoch=new_epoch, expires_at=expires, name=self.name)


@dataclass(frozen=True, slots=True)
class ReleaseSchedulerLease(Op):
    owner: str
    epoch: int
    name: str = SCHEDULER_LEASE

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE scheduler_leases SET expires_at = 0 WHERE name = ? AND owner = ? AND epoch = ?",
            (self.name, self.owner, self.epoch),
        )


def get_schedule(schedule_id: str) -> Program[ScheduleRecord]:
    rows = yield Query(
        f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE schedule_id = ?", (schedule_id,)
    )
    return _SCHEDULE_COLS.one(rows, "schedule", schedule_id)


def list_schedules(workspace_id: str | None) -> Program[list[ScheduleRecord]]:
    if workspace_id is None:
        rows = yield Query(f"SELECT {_SCHEDULE_COLS} FROM schedules ORDER BY name, schedule_id")
    else:
        rows = yield Query(
            f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE workspace_id = ? ORDER BY name",
            (workspace_id,),
        )
    return [_SCHEDULE_COLS.read(r) for r in rows]


def due_schedules(now: float, limit: int) -> Program[list[ScheduleRecord]]:
    rows = yield Query(
        f"SELECT {_SCHEDULE_COLS} FROM schedules WHERE paused = 0 AND next_fire_at <= ? "
        "ORDER BY next_fire_at LIMIT ?",
        (now, limit),
    )
    return [_SCHEDULE_COLS.read(r) for r in rows]


def list_fires(schedule_id: str, limit: int) -> Program[list[FireRecord]]:
    """Newest first."""
    rows = yield Query(
        f"SELECT {_FIRE_COLS} FROM schedule_fires WHERE schedule_id = ? "
        "ORDER BY fire_at DESC LIMIT ?",
        (schedule_id, limit),
    )
    return [_FIRE_COLS.read(r) for r in rows]


def get_scheduler_lease() -> Program[SchedulerLease | None]:
    rows = yield Query(
        f"SELECT {_LEASE_COLS} FROM scheduler_leases WHERE name = ?", (SCHEDULER_LEASE,)
    )
    return _LEASE_COLS.read(rows[0]) if rows else None


# -- webhooks ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertHook(Op):
    hook: HookRecord

    def run(self, d: Dialect, fx: Effects) -> Program[HookRecord]:
        h = self.hook
        exists = WriteConflict("hook", h.name, "already exists in this workspace")
        return (yield from _HOOK_COLS.insert_new("hooks", h, exists))


@dataclass(frozen=True, slots=True)
class DeleteHook(Op):
    hook_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query("DELETE FROM hooks WHERE hook_id = ? RETURNING hook_id", (self.hook_id,))
        if not rows:
            raise NotFound("hook", self.hook_id)
        yield Query("DELETE FROM hook_refusals WHERE hook_id = ?", (self.hook_id,))


@dataclass(frozen=True, slots=True)
class InsertRefusal(Op):
    """Record a refusal and keep only the hook's newest `MAX_REFUSALS`."""

    refusal: RefusalRecord

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        r = self.refusal
        yield Query(
            f"INSERT INTO hook_refusals ({_REFUSAL_COLS}) VALUES ({_REFUSAL_COLS.marks})",
            _REFUSAL_COLS.values(r),
        )
        # Fewer than MAX_REFUSALS rows: the bound is NULL and nothing goes.
        yield Query(
            "DELETE FROM hook_refusals WHERE hook_id = ? AND refused_at < (SELECT refused_at "
            "FROM hook_refusals WHERE hook_id = ? ORDER BY refused_at DESC LIMIT 1 OFFSET ?)",
            (r.hook_id, r.hook_id, MAX_REFUSALS - 1),
        )


@dataclass(frozen=True, slots=True)
class InsertDelivery(Op):
    """One run per ``webhook-id``: a second for the same delivery voids its unit."""

    delivery: DeliveryRecord

    def run(self, d: Dialect, fx: Effects) -> Program[DeliveryRecord]:
        v = self.delivery
        exists = WriteConflict("hook delivery", f"{v.hook_id}/{v.delivery_id}", "already accepted")
        return (yield from _DELIVERY_COLS.insert_new("hook_deliveries", v, exists))


def get_hook(hook_id: str) -> Program[HookRecord]:
    rows = yield Query(f"SELECT {_HOOK_COLS} FROM hooks WHERE hook_id = ?", (hook_id,))
    return _HOOK_COLS.one(rows, "hook", hook_id)


def list_hooks(workspace_id: str | None) -> Program[list[HookRecord]]:
    if workspace_id is None:
        rows = yield Query(f"SELECT {_HOOK_COLS} FROM hooks ORDER BY name, hook_id")
    else:
        rows = yield Query(
            f"SELECT {_HOOK_COLS} FROM hooks WHERE workspace_id = ? ORDER BY name",
            (workspace_id,),
        )
    return [_HOOK_COLS.read(r) for r in rows]


def get_delivery(hook_id: str, delivery_id: str) -> Program[DeliveryRecord | None]:
    rows = yield Query(
        f"SELECT {_DELIVERY_COLS} FROM hook_deliveries WHERE hook_id = ? AND delivery_id = ?",
        (hook_id, delivery_id),
    )
    return _DELIVERY_COLS.read(rows[0]) if rows else None


def list_deliveries(hook_id: str, limit: int) -> Program[list[DeliveryRecord]]:
    """Newest first."""
    rows = yield Query(
        f"SELECT {_DELIVERY_COLS} FROM hook_deliveries WHERE hook_id = ? "
        "ORDER BY received_at DESC LIMIT ?",
        (hook_id, limit),
    )
    return [_DELIVERY_COLS.read(r) for r in rows]


def list_refusals(hook_id: str, limit: int) -> Program[list[RefusalRecord]]:
    """Newest first."""
    rows = yield Query(
        f"SELECT {_REFUSAL_COLS} FROM hook_refusals "
        "WHERE hook_id = ? ORDER BY refused_at DESC LIMIT ?",
        (hook_id, limit),
    )
    return [_REFUSAL_COLS.read(r) for r in rows]
