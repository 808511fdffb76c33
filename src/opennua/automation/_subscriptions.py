"""Event subscriptions as the server offers them (docs/subscriptions.md).

`Subscriptions` validates and keeps them, and re-queues deliveries from the log
(`replay`). The `Deliverer` (`_deliverer.py`) does the sending. Who may call each method
is the server's decision (`_authz`); a refusal is an `AutomationError` with its code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from ulid import ULID

from opennua.protocol import ACTION_TYPES
from opennua.store import (
    EventDelivery,
    LogStore,
    NotFound,
    RegistryStore,
    SubscriptionRecord,
    SubscriptionStore,
)

from ._outbound import refused_target
from ._service import AutomationError, Secrets, check_session, found
from ._webhooks import new_secret, token_secret

#: Event names that are not action types but name one (the issue's spelling, kept so
#: the command it documents works): stored as the action type.
ALIASES = {"input.requested": "input_request.opened"}
MAX_URL = 2000
MAX_EVENTS = 64


class SubscriptionServiceStore(SubscriptionStore, LogStore, RegistryStore, Protocol):
    """What subscriptions are managed with: their rows, and the sessions and
    deployments they may be narrowed to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionSpec:
    url: str
    events: Sequence[str]
    deployment: str | None = None
    session_id: str | None = None
    #: 'webhook' (the event) or 'a2a' (A2A's payload for `execution_id`'s task, rendered
    #: by the renderer the server gives the deliverer).
    format: str = "webhook"
    execution_id: str | None = None
    #: Sent back on each delivery as `X-A2A-Notification-Token`; kept as a secret.
    token: str | None = None
    origin: str | None = None


def secret_name(subscription_id: str) -> str:
    return f"subscription.{subscription_id}"


def token_name(subscription_id: str) -> str:
    return f"subscription.{subscription_id}.token"


def event_names(events: Sequence[str]) -> tuple[str, ...]:
    """The action types ``events`` name, in order, once each; `AutomationError` for a
    name that is no action type."""
    out: list[str] = []
    for raw in events:
        name = ALIASES.get(raw.strip(), raw.strip())
        if name not in ACTION_TYPES:
            known = ", ".join(sorted(ACTION_TYPES | ALIASES.keys()))
            raise AutomationError(
                "invalid_subscription", f"{raw!r} is not an event type; one of: {known}"
            )
        if name not in out:
            out.append(name)
    if not out or len(out) > MAX_EVENTS:
        raise AutomationError("invalid_subscription", "name between 1 and 64 event types")
    return tuple(out)


def check_url(url: str) -> str:
    """An absolute http(s) URL with a host (where it resolves is the deliverer's check,
    at each try: a name may resolve elsewhere later)."""
    parts = urlsplit(url)
    if len(url) > MAX_URL or parts.scheme not in ("http", "https") or not parts.hostname:
        raise AutomationError(
            "invalid_subscription", "the URL must be an absolute http:// or https:// URL"
        )
    if parts.username or parts.password:
        raise AutomationError("invalid_subscription", "the URL must not carry credentials")
    return url


class Subscriptions:
    def __init__(
        self,
        store: SubscriptionServiceStore,
        secrets: Secrets | None,
        *,
        clock: Callable[[], float] = time.time,
        allow_private: bool = False,
    ) -> None:
        self.store = store
        self._secrets = secrets
        self._clock = clock
        #: The server's --allow-private-subscriptions, for the checks made at creation.
        self.allow_private = allow_private

    @property
    def secrets_available(self) -> bool:
        return self._secrets is not None

    @property
    def secrets(self) -> Secrets:
        if self._secrets is None:
            raise AutomationError(
                "unavailable", "this server has no secret store for subscriptions"
            )
        return self._secrets

    async def create(
        self, workspace_id: str, created_by: str, spec: SubscriptionSpec
    ) -> tuple[SubscriptionRecord, str]:
        """The subscription and its signing secret: the only time the secret is returned."""
        url = check_url(spec.url)
        events = event_names(spec.events)
        if spec.deployment is not None:
            await self._check_deployment(workspace_id, spec.deployment)
        if spec.session_id is not None:
            await check_session(self.store, workspace_id, spec.session_id)
        if spec.format != "webhook" and (spec.session_id is None or spec.execution_id is None):
            raise AutomationError("invalid_subscription", "a task's pushes name its session")
        if spec.format != "webhook":
            # A protocol's caller expects the config refused now, not failed deliveries
            # (an admin's webhook is refused at each try only, as before).
            why = await refused_target(url, self.allow_private)
            if why is not None:
                raise AutomationError("invalid_subscription", why)
        if spec.token is not None and (len(spec.token) > MAX_URL or not spec.token.isprintable()):
            raise AutomationError("invalid_subscription", "the token is not a header value")
        now = self._clock()
        subscription_id = f"sub_{ULID.from_timestamp(now)}"
        record = SubscriptionRecord(
            subscription_id=subscription_id,
            workspace_id=workspace_id,
            url=url,
            events=events,
            deployment=spec.deployment,
            session_id=spec.session_id,
            secret_name=secret_name(subscription_id),
            created_by=created_by,
            created_at=now,
            format=spec.format,
            execution_id=spec.execution_id,
            token_secret=token_name(subscription_id) if spec.token else None,
            origin=spec.origin,
        )
        secret = token_secret(spec.token) if spec.token else new_secret()
        # The secrets first: a subscription row never names a secret that is not there.
        await self.secrets.put(workspace_id, record.secret_name, secret)
        if spec.token and record.token_secret is not None:
            await self.secrets.put(workspace_id, record.token_secret, spec.token)
        return await self.store.create_subscription(record), secret

    async def get(self, subscription_id: str) -> SubscriptionRecord:
        subscription = self.store.get_subscription(subscription_id)
        return await found(subscription, f"subscription {subscription_id}")

    async def in_workspace(self, workspace_id: str) -> list[SubscriptionRecord]:
        return await self.store.list_subscriptions(workspace_id)

    async def delete(self, subscription_id: str) -> None:
        """The subscription, what it still owed and its secret go."""
        found = await self.get(subscription_id)
        secrets = self.secrets
        await self.store.delete_subscription(subscription_id)
        await secrets.delete(found.workspace_id, found.secret_name)
        if found.token_secret is not None:
            await secrets.delete(found.workspace_id, found.token_secret)

    async def deliveries(self, subscription_id: str, limit: int = 20) -> list[EventDelivery]:
        await self.get(subscription_id)
        return await self.store.list_event_deliveries(subscription_id, limit=limit)

    async def replay(
        self,
        subscription_id: str,
        *,
        event_id: str | None = None,
        from_seq: int | None = None,
        session_id: str | None = None,
    ) -> None:
        """Deliver again: one recorded event (``event_id``), or every matching action of
        ``session_id``'s log from ``from_seq`` (seqs are per session)."""
        found = await self.get(subscription_id)
        if event_id is not None:
            if from_seq is not None:
                raise AutomationError("validation_error", "name an event or a seq, not both")
            try:
                await self.store.replay_event(subscription_id, event_id, self._clock())
            except NotFound:
                msg = f"no event {event_id} was delivered to {subscription_id}"
                raise AutomationError("not_found", msg) from None
            return
        if from_seq is None or session_id is None:
            raise AutomationError(
                "validation_error", "name an event, or a session and the seq to replay from"
            )
        if found.session_id not in (None, session_id):
            raise AutomationError("not_found", f"{session_id} is not this subscription's session")
        await check_session(self.store, found.workspace_id, session_id)
        await self.store.replay_from(subscription_id, session_id, max(from_seq, 1))

    async def _check_deployment(self, workspace_id: str, deployment: str) -> None:
        try:
            record = await self.store.get_deployment(deployment)
        except NotFound:
            record = None
        if record is None or record.workspace_id not in (None, workspace_id):
            raise AutomationError("not_found", f"no deployment named {deployment!r}")
