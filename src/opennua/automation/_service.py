"""Schedules and webhooks as the server offers them (docs/automation.md).

`Automation` validates and keeps schedules and hooks, and turns a verified webhook
delivery into a turn. Who may call each method is the server's decision (`_authz`);
here a refusal is an `AutomationError` with its problem `code`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ulid import ULID

from opennua.host import AutomatedRun, SessionHost
from opennua.protocol import Accepted, Rejected
from opennua.protocol.ids import prefixed
from opennua.store import (
    AuthStore,
    AutomationStore,
    DeliveryRecord,
    Execution,
    ExecutionJournal,
    FireRecord,
    HookRecord,
    LogStore,
    NotFound,
    RefusalRecord,
    RegistryStore,
    ScheduleRecord,
    StoreError,
    Transaction,
    WriteConflict,
)

from . import _cron, _runs
from ._template import TemplateError, fields, render
from ._webhooks import BadSignature, new_secret, verify


class AutomationServiceStore(
    LogStore, ExecutionJournal, RegistryStore, AuthStore, AutomationStore, Protocol
):
    """What schedules and hooks are managed with, and what a delivery reads (its
    session and execution, whom it runs as)."""


T = TypeVar("T")
SCHEDULE_FIELDS = frozenset({"schedule", "fire_time", "schedule_id"})
#: What a hook's prompt may name: anything under `payload` (the delivery's JSON, whose
#: shape only the sender knows), and `hook`, its name (a string: nothing under it).
HOOK_FIELDS = ("payload", "payload.*", "hook")
DEFAULT_MAX_BYTES = 64 * 1024
#: A `webhook-id` longer than this is refused (it keys the run's action ids).
MAX_DELIVERY_ID = 90


class Secrets(Protocol):
    """Where hook signing secrets live: the workspace's secret store (`opennua.secrets`)."""

    async def put(self, workspace_id: str, name: str, value: str) -> Any: ...

    async def get(self, workspace_id: str, name: str) -> str: ...

    async def delete(self, workspace_id: str, name: str) -> bool: ...


class SecretCache:
    """Signing secrets read once per process, by (owner, secret name): the secret store
    records every read (a write), and a hook's or subscription's secret never changes
    under its name. Full (`size` entries), it starts again empty."""

    def __init__(self, size: int = 1000) -> None:
        self._values: dict[tuple[str, str], str] = {}
        self._size = size

    async def get(self, secrets: Secrets, owner_id: str, workspace_id: str, name: str) -> str:
        key = (owner_id, name)
        value = self._values.get(key)
        if value is None:
            value = await secrets.get(workspace_id, name)
            if len(self._values) >= self._size:
                self._values.clear()
            self._values[key] = value
        return value

    def forget(self, owner_id: str, name: str) -> None:
        self._values.pop((owner_id, name), None)


class AutomationError(Exception):
    """A refusal: `code` is the problem code (see `opennua.server._problems`)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


async def found(read: Awaitable[T], what: str) -> T:
    """What `read` returns; a record it does not find is `not_found` ("no {what}")."""
    try:
        return await read
    except NotFound:
        raise AutomationError("not_found", f"no {what}") from None


async def check_session(store: LogStore, workspace_id: str, session_id: str) -> None:
    """`not_found` unless the session is one of the workspace's."""
    try:
        session = await store.get_session(session_id)
    except NotFound:
        session = None
    if session is None or session.workspace_id != workspace_id:
        raise AutomationError("not_found", f"no session {session_id} in this workspace")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    name: str
    cron: str
    deployment: str
    prompt: str
    timezone: str = "UTC"
    misfire: Literal["skip", "run_once"] = "skip"
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookSpec:
    name: str
    deployment: str
    prompt: str
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One fire of a schedule and how its execution stands now (`refused`: it started
    none, and the fire says why)."""

    fire: FireRecord
    status: str | None


@dataclass(frozen=True, slots=True)
class Delivered:
    """A delivery's answer (the same for every copy of it) and whether this copy was a
    redelivery that started nothing (the metric counts it `replayed`)."""

    answer: dict[str, str]
    replayed: bool


def _replay(known: DeliveryRecord, digest: str) -> Delivered:
    """A redelivery's answer: the first acceptance, if it carries the same body."""
    if known.body_sha256 != digest:
        raise AutomationError(
            "idempotency_key_reused", "this webhook-id was delivered with another body"
        )
    answer = {
        "delivery_id": known.delivery_id,
        "session_id": known.session_id,
        "turn_id": known.turn_id,
        "execution_id": known.execution_id,
    }
    return Delivered(answer, replayed=True)


def secret_name(hook_id: str) -> str:
    return f"hook.{hook_id}"


class Automation:
    def __init__(
        self,
        store: AutomationServiceStore,
        host: SessionHost,
        secrets: Secrets | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.host = host
        self._secrets = secrets
        self._clock = clock
        # The hook row itself is read on every delivery, so a deleted hook is refused at once.
        self._signing = SecretCache()

    @property
    def secrets(self) -> Secrets:
        if self._secrets is None:
            raise AutomationError("unavailable", "this server has no secret store for hooks")
        return self._secrets

    # -- schedules ----------------------------------------------------------------------

    async def create_schedule(
        self, workspace_id: str, created_by: str, spec: ScheduleSpec
    ) -> ScheduleRecord:
        try:
            _cron.check(spec.cron, spec.timezone)
        except _cron.CronError as exc:
            raise AutomationError("invalid_schedule", str(exc)) from None
        unknown = set(fields(spec.prompt)) - SCHEDULE_FIELDS
        if unknown:
            raise AutomationError(
                "invalid_schedule",
                f"the prompt uses {sorted(unknown)}; a schedule has {sorted(SCHEDULE_FIELDS)}",
            )
        await self._check_deployment(workspace_id, spec.deployment)
        if spec.session_id is not None:
            await check_session(self.store, workspace_id, spec.session_id)
        now = self._clock()
        record = ScheduleRecord(
            schedule_id=prefixed("schedule", ULID.from_timestamp(now)),
            workspace_id=workspace_id,
            name=spec.name,
            cron=spec.cron,
            timezone=spec.timezone,
            deployment=spec.deployment,
            prompt=spec.prompt,
            misfire=spec.misfire,
            created_by=created_by,
            created_at=now,
            session_id=spec.session_id,
            next_fire_at=_cron.next_slot(spec.cron, spec.timezone, now),
        )
        try:
            return await self.store.create_schedule(record)
        except WriteConflict as exc:
            raise AutomationError(
                "already_exists", f"a schedule named {spec.name!r} exists"
            ) from exc

    async def schedule(self, schedule_id: str) -> ScheduleRecord:
        return await found(self.store.get_schedule(schedule_id), f"schedule {schedule_id}")

    async def schedules(self, workspace_id: str) -> list[ScheduleRecord]:
        return await self.store.list_schedules(workspace_id)

    async def pause(self, schedule_id: str) -> ScheduleRecord:
        await self.schedule(schedule_id)
        return await self.store.set_schedule_paused(schedule_id, True)

    async def resume(self, schedule_id: str) -> ScheduleRecord:
        """Go on from the next slot after now: what a pause skipped is not caught up."""
        current = await self.schedule(schedule_id)
        nxt = _cron.next_slot(current.cron, current.timezone, self._clock())
        return await self.store.set_schedule_paused(schedule_id, False, next_fire_at=nxt)

    async def delete_schedule(self, schedule_id: str) -> None:
        await self.schedule(schedule_id)
        await self.store.delete_schedule(schedule_id)

    async def runs(self, schedule_id: str, limit: int = 20) -> list[Run]:
        fires = await self.store.list_fires(schedule_id, limit=limit)
        out = []
        for fire in fires:
            status: str | None = "refused"
            if fire.execution_id is not None:
                try:
                    execution: Execution = await self.store.get_execution(fire.execution_id)
                    status = execution.status
                except NotFound:
                    status = None
            out.append(Run(fire=fire, status=status))
        return out

    # -- webhooks -----------------------------------------------------------------------

    async def create_hook(
        self, workspace_id: str, created_by: str, spec: HookSpec
    ) -> tuple[HookRecord, str]:
        """The hook and its signing secret: the only time the secret is returned."""
        if not 1 <= spec.max_bytes <= 1024 * 1024:
            raise AutomationError("invalid_hook", "max_bytes is between 1 and 1048576")
        # A field no delivery can have would make every delivery 422: refused now, as a
        # schedule's is.
        unknown = [f for f in fields(spec.prompt) if f != "hook" and f.split(".")[0] != "payload"]
        if unknown:
            raise AutomationError(
                "invalid_hook",
                f"the prompt uses {sorted(set(unknown))}; a hook has {list(HOOK_FIELDS)}",
            )
        await self._check_deployment(workspace_id, spec.deployment)
        now = self._clock()
        hook_id = prefixed("hook", ULID.from_timestamp(now))
        secret = new_secret()
        record = HookRecord(
            hook_id=hook_id,
            workspace_id=workspace_id,
            name=spec.name,
            deployment=spec.deployment,
            prompt=spec.prompt,
            secret_name=secret_name(hook_id),
            max_bytes=spec.max_bytes,
            created_by=created_by,
            created_at=now,
        )
        # The secret first: a hook row never names a secret that is not there.
        await self.secrets.put(workspace_id, record.secret_name, secret)
        try:
            created = await self.store.create_hook(record)
        except WriteConflict as exc:
            await self.secrets.delete(workspace_id, record.secret_name)
            msg = f"a hook named {spec.name!r} exists"
            raise AutomationError("already_exists", msg) from exc
        return created, secret

    async def hook(self, hook_id: str) -> HookRecord:
        return await found(self.store.get_hook(hook_id), f"hook {hook_id}")

    async def hooks(self, workspace_id: str) -> list[HookRecord]:
        return await self.store.list_hooks(workspace_id)

    async def delete_hook(self, hook_id: str) -> None:
        hook = await self.hook(hook_id)
        secrets = self.secrets
        await self.store.delete_hook(hook_id)
        self._signing.forget(hook.hook_id, hook.secret_name)
        await secrets.delete(hook.workspace_id, hook.secret_name)

    async def deliver(self, hook_id: str, body: bytes, headers: Mapping[str, str]) -> Delivered:
        """A delivery: verified, then one turn per `webhook-id` (a redelivery gets the
        first acceptance). `BadSignature` for an unknown hook too: its existence does not
        leak to whoever lacks its secret."""
        try:
            hook = await self.store.get_hook(hook_id)
            secret = await self._signing.get(
                self.secrets, hook.hook_id, hook.workspace_id, hook.secret_name
            )
        except Exception:  # any failure to find the hook's secret is "not signed"
            raise BadSignature("unknown hook") from None
        try:
            return await self._accept(hook, secret, body, headers)
        except (BadSignature, AutomationError) as exc:
            # Kept for the hook's owner to see (docs/automation.md); an unknown hook's are not.
            code = exc.code if isinstance(exc, AutomationError) else "bad_signature"
            refusal = RefusalRecord(
                hook_id=hook_id,
                refused_at=self._clock(),
                code=code,
                delivery_id=(headers.get("webhook-id") or None) and headers["webhook-id"][:128],
                body_bytes=len(body),
            )
            with contextlib.suppress(StoreError):  # the refusal stands even so
                await self.store.record_refusal(refusal)
            raise

    async def refusals(self, hook_id: str, limit: int = 20) -> list[RefusalRecord]:
        """The hook's newest refused deliveries."""
        await self.hook(hook_id)
        return await self.store.list_refusals(hook_id, limit=limit)

    async def _accept(
        self, hook: HookRecord, secret: str, body: bytes, headers: Mapping[str, str]
    ) -> Delivered:
        hook_id = hook.hook_id
        delivery_id = verify(secret, body, headers)
        if len(delivery_id) > MAX_DELIVERY_ID:
            raise AutomationError(
                "validation_error", f"webhook-id is longer than {MAX_DELIVERY_ID} characters"
            )
        digest = hashlib.sha256(body).hexdigest()
        known = await self.store.get_delivery(hook_id, delivery_id)
        if known is not None:
            return _replay(known, digest)
        if len(body) > hook.max_bytes:
            raise AutomationError(
                "payload_too_large", f"the payload is over this hook's {hook.max_bytes} bytes"
            )
        try:
            payload = json.loads(body)
        except ValueError:
            raise AutomationError("invalid_payload", "the payload is not JSON") from None
        try:
            prompt = render(hook.prompt, {"payload": payload, "hook": hook.name})
        except TemplateError as exc:
            raise AutomationError("invalid_payload", str(exc)) from None
        try:
            principal_id, deployment = await _runs.resolve(
                self.store, hook.workspace_id, hook.deployment
            )
        except _runs.Unrunnable as exc:
            raise AutomationError("deployment_unresolvable", exc.detail) from None
        now = self._clock()

        def record(tx: Transaction, session_id: str, turn_id: str, execution_id: str) -> None:
            tx.record_delivery(
                DeliveryRecord(
                    hook_id=hook_id,
                    delivery_id=delivery_id,
                    body_sha256=digest,
                    received_at=now,
                    session_id=session_id,
                    turn_id=turn_id,
                    execution_id=execution_id,
                )
            )

        run = AutomatedRun(
            key=f"{hook_id}/{delivery_id}",
            client_id=hook_id,
            workspace_id=hook.workspace_id,
            deployment=hook.deployment,
            principal_id=principal_id,
            trigger={
                "kind": "automation",
                "source": f"webhook:{hook_id}/{delivery_id}",
                "principal_id": hook.created_by,
                "hook_id": hook_id,
                "delivery_id": delivery_id,
            },
            prompt=prompt,
            title=f"{hook.name} · {delivery_id}"[:200],
            grant=_runs.grant(principal_id, hook.workspace_id, now),
            record=record,
            deployment_record=deployment,
        )
        try:
            result = await self.host.start_automated(run)
        except WriteConflict:
            # A concurrent copy of this delivery won the unit: answer what it got.
            known = await self.store.get_delivery(hook_id, delivery_id)
            if known is None:  # pragma: no cover - the conflict is that row
                raise
            return _replay(known, digest)
        if isinstance(result, Rejected):
            raise AutomationError(result.code, result.message)
        assert isinstance(result, Accepted)
        return Delivered({"delivery_id": delivery_id, **result.ids}, replayed=False)

    # -- checks -------------------------------------------------------------------------

    async def _check_deployment(self, workspace_id: str, deployment: str) -> None:
        try:
            await _runs.run_as(self.store, workspace_id, deployment)
        except _runs.Unrunnable as exc:
            raise AutomationError(exc.code, exc.detail) from None
