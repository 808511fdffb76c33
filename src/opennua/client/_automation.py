"""Schedules, webhooks, event subscriptions, secrets, the gateway's audit and usage, over
the HTTP API (docs/automation.md, docs/subscriptions.md, docs/secrets.md, docs/gateway.md).
Calls scoped to a workspace take `workspace_id` (none: the caller's first)."""

from __future__ import annotations

from typing import Any

from ._api import Api, segment, where
from .responses import (
    AuditDoc,
    EventDeliveryDoc,
    HookCreated,
    HookDoc,
    RunDoc,
    ScheduleDoc,
    ScheduleWithRuns,
    SecretDoc,
    SubscriptionCreated,
    SubscriptionDoc,
    UsageDoc,
)


class AutomationApi(Api):
    # -- schedules ---------------------------------------------------------------------------

    async def create_schedule(
        self, spec: dict[str, Any], *, workspace_id: str | None = None
    ) -> ScheduleWithRuns:
        """A schedule from `{name, cron, prompt, deployment, timezone, misfire, session_id}`."""
        created: ScheduleWithRuns = await self._json(
            "POST", "/v1/schedules", json=spec, params=where(workspace_id)
        )
        return created

    async def schedules(
        self, *, workspace_id: str | None = None, runs: int = 0
    ) -> list[ScheduleWithRuns]:
        """The workspace's schedules, each with its `runs` most recent runs."""
        params = {**where(workspace_id), "runs": str(runs)}
        items: list[ScheduleWithRuns] = (await self._json("GET", "/v1/schedules", params=params))[
            "schedules"
        ]
        return items

    async def pause_schedule(self, schedule_id: str) -> ScheduleDoc:
        paused: ScheduleDoc = await self._json(
            "POST", f"/v1/schedules/{segment(schedule_id)}/pause"
        )
        return paused

    async def resume_schedule(self, schedule_id: str) -> ScheduleDoc:
        resumed: ScheduleDoc = await self._json(
            "POST", f"/v1/schedules/{segment(schedule_id)}/resume"
        )
        return resumed

    async def delete_schedule(self, schedule_id: str) -> None:
        await self.request("DELETE", f"/v1/schedules/{segment(schedule_id)}")

    async def schedule_runs(self, schedule_id: str, *, limit: int = 20) -> list[RunDoc]:
        """Its fires, newest first."""
        path = f"/v1/schedules/{segment(schedule_id)}/runs"
        runs: list[RunDoc] = (await self._json("GET", path, params={"limit": str(limit)}))["runs"]
        return runs

    # -- hooks -------------------------------------------------------------------------------

    async def create_hook(
        self, spec: dict[str, Any], *, workspace_id: str | None = None
    ) -> HookCreated:
        """A webhook from `{name, prompt, deployment, max_bytes}`; its signing secret is
        returned this once."""
        created: HookCreated = await self._json(
            "POST", "/v1/hooks", json=spec, params=where(workspace_id)
        )
        return created

    async def hooks(self, *, workspace_id: str | None = None) -> list[HookDoc]:
        items: list[HookDoc] = (await self._json("GET", "/v1/hooks", params=where(workspace_id)))[
            "hooks"
        ]
        return items

    async def delete_hook(self, hook_id: str) -> None:
        await self.request("DELETE", f"/v1/hooks/{segment(hook_id)}")

    # -- event subscriptions (docs/subscriptions.md) -----------------------------------------

    async def create_subscription(
        self, spec: dict[str, Any], *, workspace_id: str | None = None
    ) -> SubscriptionCreated:
        """A subscription from `{url, events, deployment, session_id}`; its signing secret
        is returned this once."""
        created: SubscriptionCreated = await self._json(
            "POST", "/v1/subscriptions", json=spec, params=where(workspace_id)
        )
        return created

    async def subscriptions(self, *, workspace_id: str | None = None) -> list[SubscriptionDoc]:
        found = await self._json("GET", "/v1/subscriptions", params=where(workspace_id))
        items: list[SubscriptionDoc] = found["subscriptions"]
        return items

    async def subscription(self, subscription_id: str) -> SubscriptionDoc:
        doc: SubscriptionDoc = await self._get(f"/v1/subscriptions/{segment(subscription_id)}")
        return doc

    async def delete_subscription(self, subscription_id: str) -> None:
        await self.request("DELETE", f"/v1/subscriptions/{segment(subscription_id)}")

    async def subscription_deliveries(
        self, subscription_id: str, *, limit: int = 20
    ) -> list[EventDeliveryDoc]:
        """Its deliveries, newest first: state, attempts, last status and error."""
        path = f"/v1/subscriptions/{segment(subscription_id)}/deliveries"
        found: list[EventDeliveryDoc] = (await self._get(path, limit=str(limit)))["deliveries"]
        return found

    async def replay_subscription(
        self,
        subscription_id: str,
        *,
        event_id: str | None = None,
        from_seq: int | None = None,
        session_id: str | None = None,
    ) -> None:
        """Deliver again: one event (`event_id`), or `session_id`'s log from `from_seq`."""
        body: dict[str, Any] = (
            {"event_id": event_id}
            if event_id is not None
            else {"from_seq": from_seq, "session_id": session_id}
        )
        path = f"/v1/subscriptions/{segment(subscription_id)}/replay"
        await self.request("POST", path, json=body)

    # -- secrets, audit, usage ---------------------------------------------------------------

    async def set_secret(
        self, name: str, value: str, *, workspace_id: str | None = None
    ) -> SecretDoc:
        """Create or replace a secret; its value never comes back."""
        path = f"/v1/secrets/{segment(name)}"
        saved: SecretDoc = await self._json(
            "PUT", path, json={"value": value}, params=where(workspace_id)
        )
        return saved

    async def secrets(self, *, workspace_id: str | None = None) -> list[SecretDoc]:
        """Names, creation and last use: never values."""
        items: list[SecretDoc] = (
            await self._json("GET", "/v1/secrets", params=where(workspace_id))
        )["items"]
        return items

    async def delete_secret(self, name: str, *, workspace_id: str | None = None) -> None:
        await self.request("DELETE", f"/v1/secrets/{segment(name)}", params=where(workspace_id))

    async def audit(
        self,
        *,
        workspace_id: str | None = None,
        execution_id: str | None = None,
        limit: int = 100,
    ) -> list[AuditDoc]:
        """The gateway's calls and egress connections (admins), newest first."""
        params = where(workspace_id) | {"limit": str(limit)}
        if execution_id:
            params["execution_id"] = execution_id
        items: list[AuditDoc] = (await self._json("GET", "/v1/audit", params=params))["items"]
        return items

    async def usage(
        self, by: str = "principal", *, since: float | None = None, workspace_id: str | None = None
    ) -> UsageDoc:
        """Tokens and cost since `since` (unix seconds) grouped `by` execution principal,
        workspace, model or deployment."""
        params: dict[str, Any] = {"by": by, **where(workspace_id)}
        if since is not None:
            params["since"] = since
        report: UsageDoc = await self._json("GET", "/v1/usage", params=params)
        return report
