"""Who an automated turn runs as, and the grant it runs under.

The execution principal is the deployment's `principal_id`; the trigger (the schedule or
hook, and whoever created it) is recorded for causality and grants nothing: the grant
names the deployment's principal and no token, and the supervisor checks it at claim and
every renewal like any other (a principal that may not act in the workspace ends the turn
`revoked`).
"""

from __future__ import annotations

from typing import Protocol

from opennua.auth import GRANT_TTL
from opennua.host import DeploymentSpec, Refused, execution_principal
from opennua.store import AuthStore, DeploymentRecord, GrantRecord, NotFound, RegistryStore


class RunAsStore(RegistryStore, AuthStore, Protocol):
    """What finding whom a deployment's run runs as reads: the deployment, and the
    workspace's principals and members."""


class Unrunnable(Exception):
    """The trigger's deployment cannot be resolved to a principal (code, detail)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


async def run_as(store: RunAsStore, workspace_id: str, deployment: str) -> str:
    """The principal a deployment's automated turns run as in `workspace_id`."""
    return (await resolve(store, workspace_id, deployment))[0]


async def resolve(
    store: RunAsStore, workspace_id: str, deployment: str
) -> tuple[str, DeploymentRecord]:
    """`run_as`, and the deployment as it was read (for `AutomatedRun.deployment_record`)."""
    try:
        record = await store.get_deployment(deployment)
    except NotFound:
        record = None
    if record is None or record.workspace_id not in (None, workspace_id):
        # Another workspace's deployment is as absent as an unknown one.
        raise Unrunnable("not_found", f"no deployment named {deployment!r}")
    spec = DeploymentSpec.model_validate(record.spec)
    try:
        return await execution_principal(store, spec, workspace_id), record
    except Refused as exc:
        raise Unrunnable(exc.code, exc.detail) from None


def grant(principal_id: str, workspace_id: str, now: float) -> GrantRecord:
    """The grant of an automated execution: the principal's rights, no person's token."""
    return GrantRecord(
        execution_id="",
        principal_id=principal_id,
        workspace_id=workspace_id,
        expires_at=now + GRANT_TTL,
        token_id=None,
        caps={},
    )
