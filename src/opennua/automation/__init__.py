"""opennua.automation: schedules (cron) and signed webhooks start turns against a
deployment, as the deployment's principal (docs/automation.md)."""

from ._cron import CronError, Plan, next_slot, plan
from ._scheduler import Scheduler, slot_key
from ._service import (
    Automation,
    AutomationError,
    HookSpec,
    Run,
    ScheduleSpec,
    Secrets,
)
from ._template import TemplateError, render
from ._webhooks import BadSignature, new_secret, sign, verify

__all__ = [
    "Automation",
    "AutomationError",
    "BadSignature",
    "CronError",
    "HookSpec",
    "Plan",
    "Run",
    "ScheduleSpec",
    "Scheduler",
    "Secrets",
    "TemplateError",
    "new_secret",
    "next_slot",
    "plan",
    "render",
    "sign",
    "slot_key",
    "verify",
]
