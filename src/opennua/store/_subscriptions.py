"""Event subscriptions' records, write programs and reads (docs/subscriptions.md).

A subscription follows the logs of its workspace's sessions with a cursor per
``(subscription, session)``: the last seq scanned. The deliverer records what it found
(`RecordScan`: the deliveries and the cursor moved on from the seq it read, in one unit),
so a crash between two scans loses nothing and records nothing twice; a delivery is keyed
by ``(subscription_id, event_id)``. One deliverer runs at a time, under the
``subscriptions`` lease (the scheduler's table, its own row): every unit it writes is
fenced by the lease's epoch, as the scheduler's fires are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._automation import CheckSchedulerLease
from ._errors import NotFound, WriteConflict
from ._json import dumps, loads
from ._sql import CHECKED_RECORDS, Columns, Dialect, Effects, Op, Program, Query

DELIVERY_LEASE = "subscriptions"
DeliveryState = Literal["pending", "delivered", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionRecord:
    subscription_id: str
    workspace_id: str
    url: str
    events: tuple[str, ...]
    secret_name: str
    created_by: str
    created_at: float
    deployment: str | None = None
    session_id: str | None = None
    disabled_at: float | None = None
    disabled_reason: str | None = None
    #: What a delivery carries: the webhook event, or ('a2a') A2A's payload for the task.
    format: str = "webhook"
    #: The one task (execution) followed, for an A2A push config.
    execution_id: str | None = None
    #: The name of the secret holding the A2A notification token (never the value).
    token_secret: str | None = None
    #: The server URL the subscription was created through (links in rendered payloads).
    origin: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDelivery:
    """One event owed to one subscription: its signed body's payload (JSON text, the same
    on every try) and how sending it stands."""

    subscription_id: str
    event_id: str
    session_id: str
    seq: int
    event_type: str
    payload: str
    state: DeliveryState
    attempts: int
    next_at: float
    created_at: float
    updated_at: float
    last_status: int | None = None
    last_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BehindSession:
    """A session in a subscription's scope whose log moved past the subscription's cursor
    (``cursor`` None: never scanned, from the start)."""

    session_id: str
    last_seq: int
    cursor: int | None
    deployment_digest: str | None


CHECKED_RECORDS.update({SubscriptionRecord, EventDelivery})

_SUB_COLS = Columns(SubscriptionRecord, decode={"events": lambda text: tuple(loads(text))})
_DLV_COLS = Columns(EventDelivery)


@dataclass(frozen=True, slots=True)
class InsertSubscription(Op):
    """The subscription, and a cursor at the end of each session already in its scope: it
    delivers what is committed from now on (`ReplayFrom` goes back)."""

    subscription: SubscriptionRecord

    def run(self, d: Dialect, fx: Effects) -> Program[SubscriptionRecord]:
        s = self.subscription
        yield Query(
            f"INSERT INTO subscriptions ({_SUB_COLS}) VALUES ({_SUB_COLS.marks})",
            _SUB_COLS.values(s, events=dumps(list(s.events), "events")),
        )
        only, params = "", tuple[str, ...]()
        if s.session_id is not None:
            only, params = " AND session_id = ?", (s.session_id,)
        yield Query(
            "INSERT INTO subscription_cursors (subscription_id, session_id, seq) "
            f"SELECT ?, session_id, last_seq FROM sessions WHERE workspace_id = ?{only}",
            (s.subscription_id, s.workspace_id, *params),
        )
        return s


@dataclass(frozen=True, slots=True)
class DeleteSubscription(Op):
    """The subscription, its cursors and its deliveries go (nothing more is owed)."""

    subscription_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "DELETE FROM subscriptions WHERE subscription_id = ? RETURNING subscription_id",
            (self.subscription_id,),
        )
        if not rows:
            raise NotFound("subscription", self.subscription_id)
        for table in ("subscription_cursors", "subscription_deliveries"):
            yield Query(f"DELETE FROM {table} WHERE subscription_id = ?", (self.subscription_id,))


@dataclass(frozen=True, slots=True)
class RecordScan(Op):
    """What one scan of one session found: its deliveries (a replayed event becomes
    pending again), and the cursor moved from ``expected`` (None: no cursor yet) to
    ``seq``. A cursor that moved meanwhile voids the unit (`WriteConflict`)."""

    subscription_id: str
    session_id: str
    expected: int | None
    seq: int
    deliveries: tuple[EventDelivery, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        if self.expected is None:
            rows = yield Query(
                "INSERT INTO subscription_cursors (subscription_id, session_id, seq) "
                "VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq",
                (self.subscription_id, self.session_id, self.seq),
            )
        else:
            rows = yield Query(
                "UPDATE subscription_cursors SET seq = ? WHERE subscription_id = ? "
                "AND session_id = ? AND seq = ? RETURNING seq",
                (self.seq, self.subscription_id, self.session_id, self.expected),
            )
        if not rows:
            raise WriteConflict("subscription cursor", self.session_id, "moved meanwhile")
        for v in self.deliveries:
            yield Query(
                f"INSERT INTO subscription_deliveries ({_DLV_COLS}) VALUES ({_DLV_COLS.marks}) "
                "ON CONFLICT (subscription_id, event_id) DO UPDATE SET state = 'pending', "
                "attempts = 0, next_at = excluded.next_at, last_status = NULL, "
                "last_error = NULL, payload = excluded.payload, updated_at = excluded.updated_at",
                _DLV_COLS.values(v),
            )


@dataclass(frozen=True, slots=True)
class RecordAttempt(Op):
    """How a try ended: delivered, pending again at ``next_at``, or failed; ``disable``
    (a 410) stops the subscription in the same unit."""

    subscription_id: str
    event_id: str
    state: DeliveryState
    next_at: float
    status: int | None
    error: str | None
    now: float
    disable: str | None = None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE subscription_deliveries SET state = ?, attempts = attempts + 1, "
            "next_at = ?, last_status = ?, last_error = ?, updated_at = ? "
            "WHERE subscription_id = ? AND event_id = ?",
            (self.state, self.next_at, self.status, self.error, self.now,
             self.subscription_id, self.event_id),
        )  # fmt: skip
        if self.disable is not None:
            yield Query(
                "UPDATE subscriptions SET disabled_at = ?, disabled_reason = ? "
                "WHERE subscription_id = ? AND disabled_at IS NULL",
                (self.now, self.disable, self.subscription_id),
            )


@dataclass(frozen=True, slots=True)
class ClaimTries(Op):
    """Deliveries a try is starting for: not due again before ``until`` (so the next
    scan of due ones skips them while they are in flight, and a try a crash cut short is
    made again after it)."""

    keys: tuple[tuple[str, str], ...]
    until: float

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE subscription_deliveries SET next_at = ? "
            "WHERE subscription_id = ? AND event_id = ? AND state = 'pending'",
            [(self.until, sub, evt) for sub, evt in self.keys],
            many=True,
        )


@dataclass(frozen=True, slots=True)
class ReplayEvent(Op):
    """Deliver one recorded event again: pending from ``now``, its attempts from zero."""

    subscription_id: str
    event_id: str
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE subscription_deliveries SET state = 'pending', attempts = 0, next_at = ?, "
            "last_status = NULL, last_error = NULL, updated_at = ? "
            "WHERE subscription_id = ? AND event_id = ? RETURNING event_id",
            (self.now, self.now, self.subscription_id, self.event_id),
        )
        if not rows:
            raise NotFound("event", self.event_id)


@dataclass(frozen=True, slots=True)
class ReplayFrom(Op):
    """Scan a session's log again from ``seq``: the cursor goes back (never forward), and
    the deliverer records each matching event from there as pending (`RecordScan`)."""

    subscription_id: str
    session_id: str
    seq: int

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        back = max(self.seq - 1, 0)
        yield Query(
            "INSERT INTO subscription_cursors (subscription_id, session_id, seq) VALUES (?, ?, ?) "
            "ON CONFLICT (subscription_id, session_id) DO UPDATE SET seq = "
            "CASE WHEN excluded.seq < subscription_cursors.seq THEN excluded.seq "
            "ELSE subscription_cursors.seq END",
            (self.subscription_id, self.session_id, back),
        )


def fenced(owner: str, epoch: int, *ops: Op) -> tuple[Op, ...]:
    """``ops`` behind the deliverer's lease check."""
    return (CheckSchedulerLease(owner, epoch, DELIVERY_LEASE), *ops)


def get_subscription(subscription_id: str) -> Program[SubscriptionRecord]:
    rows = yield Query(
        f"SELECT {_SUB_COLS} FROM subscriptions WHERE subscription_id = ?", (subscription_id,)
    )
    return _SUB_COLS.one(rows, "subscription", subscription_id)


def list_subscriptions(workspace_id: str | None) -> Program[list[SubscriptionRecord]]:
    """A workspace's, or (None) every active one: what the deliverer follows."""
    if workspace_id is None:
        rows = yield Query(
            f"SELECT {_SUB_COLS} FROM subscriptions WHERE disabled_at IS NULL "
            "ORDER BY subscription_id"
        )
    else:
        rows = yield Query(
            f"SELECT {_SUB_COLS} FROM subscriptions WHERE workspace_id = ? "
            "ORDER BY subscription_id",
            (workspace_id,),
        )
    return [_SUB_COLS.read(r) for r in rows]


def sessions_behind(s: SubscriptionRecord, limit: int) -> Program[list[BehindSession]]:
    only, params = ("", ()) if s.session_id is None else (" AND s.session_id = ?", (s.session_id,))
    rows = yield Query(
        "SELECT s.session_id, s.last_seq, c.seq, s.deployment_digest FROM sessions s "
        "LEFT JOIN subscription_cursors c ON c.subscription_id = ? "
        "AND c.session_id = s.session_id "
        f"WHERE s.workspace_id = ?{only} AND (c.seq IS NULL OR s.last_seq > c.seq) "
        "ORDER BY s.session_id LIMIT ?",
        (s.subscription_id, s.workspace_id, *params, limit),
    )
    return [BehindSession(session_id=r[0], last_seq=r[1], cursor=r[2], deployment_digest=r[3])
            for r in rows]  # fmt: skip


def due_deliveries(now: float, limit: int) -> Program[list[EventDelivery]]:
    """Pending deliveries of active subscriptions whose next try is due, oldest first."""
    rows = yield Query(
        f"SELECT {_DLV_COLS.of('v')} FROM subscription_deliveries v JOIN subscriptions s "
        "ON s.subscription_id = v.subscription_id "
        "WHERE v.state = 'pending' AND v.next_at <= ? AND s.disabled_at IS NULL "
        "ORDER BY v.next_at LIMIT ?",
        (now, limit),
    )
    return [_DLV_COLS.read(r) for r in rows]


def list_event_deliveries(subscription_id: str, limit: int) -> Program[list[EventDelivery]]:
    """Newest first."""
    rows = yield Query(
        f"SELECT {_DLV_COLS} FROM subscription_deliveries WHERE subscription_id = ? "
        "ORDER BY created_at DESC, seq DESC LIMIT ?",
        (subscription_id, limit),
    )
    return [_DLV_COLS.read(r) for r in rows]


def get_event_delivery(subscription_id: str, event_id: str) -> Program[EventDelivery]:
    rows = yield Query(
        f"SELECT {_DLV_COLS} FROM subscription_deliveries WHERE subscription_id = ? "
        "AND event_id = ?",
        (subscription_id, event_id),
    )
    return _DLV_COLS.one(rows, "event", event_id)
