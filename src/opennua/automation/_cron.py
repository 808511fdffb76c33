"""Cron slots and the misfire rule. Pure: the caller passes the time.

A schedule's slots are the instants its cron expression names in its time zone (5 fields,
or 6 with seconds last, as croniter reads them); around DST changes the slots are
croniter's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

Misfire = Literal["skip", "run_once"]
#: A slot this late is still fired ("late"); later than this it is "missed" and the
#: misfire policy decides (docs/automation.md).
DEFAULT_GRACE = 60.0
#: How many slots one decision looks at: a per-second schedule down for a day is a
#: misfire, not 86,400 fires.
MAX_CATCH_UP = 1000


class CronError(ValueError):
    """A cron expression or time zone that cannot be used."""


def zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone {timezone!r}") from exc


def check(cron: str, timezone: str) -> None:
    """Raise `CronError` unless the expression and time zone are usable."""
    zone(timezone)
    if len(cron.split()) not in (5, 6) or not croniter.is_valid(cron):
        raise CronError(f"not a cron expression (5 fields, or 6 with seconds): {cron!r}")


def next_slot(cron: str, timezone: str, after: float) -> float | None:
    """The first slot strictly after `after` (epoch seconds), or None if there is none."""
    start = datetime.fromtimestamp(after, zone(timezone))
    try:
        it = croniter(cron, start)
        nxt: float = it.get_next(float)
    except (CroniterBadCronError, CroniterBadDateError) as exc:
        raise CronError(str(exc)) from exc
    return nxt


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with a due schedule now: fire `fire` (or nothing), and move its next
    slot to `next_fire_at`. `skipped` counts the missed slots not fired."""

    fire: float | None
    next_fire_at: float | None
    skipped: int


def plan(
    cron: str,
    timezone: str,
    due: float,
    now: float,
    misfire: Misfire,
    *,
    grace: float = DEFAULT_GRACE,
) -> Plan:
    """Decide one step for a schedule whose next undecided slot is `due` (<= now).

    A slot at most `grace` late fires (late slots fire one by one, oldest first, so a
    short outage loses nothing). Missed slots (older than that) are dropped under `skip`;
    under `run_once` only the newest missed slot fires, once.
    """
    if now - due <= grace:
        return Plan(due, next_slot(cron, timezone, due), 0)
    # Walk the missed slots up to the first one within grace (or the future).
    missed = [due]
    slot: float | None = next_slot(cron, timezone, due)
    while slot is not None and now - slot > grace and len(missed) < MAX_CATCH_UP:
        missed.append(slot)
        slot = next_slot(cron, timezone, slot)
    if slot is not None and now - slot > grace:
        # Still missed after MAX_CATCH_UP slots: jump to the present.
        slot = next_slot(cron, timezone, now - grace)
    if misfire == "run_once":
        return Plan(missed[-1], slot, len(missed) - 1)
    return Plan(None, slot, len(missed))
