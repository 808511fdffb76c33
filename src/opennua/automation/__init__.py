"""opennua.automation: schedules (cron) and signed webhooks start turns against a
deployment, as the deployment's principal (docs/automation.md); event subscriptions
deliver a workspace's actions to URLs, signed (docs/subscriptions.md)."""

from opennua._common import RetryPolicy

from ._cron import CronError, Plan, next_slot, plan
from ._deliverer import SUBSCRIPTION_RETRY, Deliverer, Renderer, RenderStep, event_id
from ._outbound import Outbound
from ._scheduler import Scheduler, slot_key
from ._service import (
    Automation,
    AutomationError,
    Delivered,
    HookSpec,
    Run,
    ScheduleSpec,
    Secrets,
)
from ._subscriptions import Subscriptions, SubscriptionSpec
from ._template import TemplateError, render
from ._webhooks import BadSignature, new_secret, sign, token_secret, verify

__all__ = [
    "SUBSCRIPTION_RETRY",
    "Automation",
    "AutomationError",
    "BadSignature",
    "CronError",
    "Delivered",
    "Deliverer",
    "HookSpec",
    "Outbound",
    "Plan",
    "RenderStep",
    "Renderer",
    "RetryPolicy",
    "Run",
    "ScheduleSpec",
    "Scheduler",
    "Secrets",
    "SubscriptionSpec",
    "Subscriptions",
    "TemplateError",
    "event_id",
    "new_secret",
    "next_slot",
    "plan",
    "render",
    "sign",
    "slot_key",
    "token_secret",
    "verify",
]
