"""Build the agent an execution runs from its session's execution snapshot, not from a
process-wide definition (docs/plugins.md, "Execution snapshot").

The snapshot names a published plugin version; its files are materialized from the blob
store into a cache directory keyed by the plugin digest (written aside and renamed into
place, so a crash never leaves a half-written plugin under that name), then turned into
an agent with the snapshot's model by the runtime's `agent_from_plugin`. Two executions of
one version share the directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from opennua.plugins import read_plugin
from opennua.runtime import AgentDefinition, Limits, RuntimeFailure, agent_from_plugin
from opennua.store import Execution, PluginVersion, Store


class SnapshotMismatch(RuntimeFailure):
    """The execution was created for another snapshot than its session is bound to."""

    code = "snapshot_mismatch"


#: `(workspace_id, secret name) -> value`: how a deployment's confirmed `sandbox_env` is
#: filled (`opennua.secrets.SecretStore.get`).
SandboxSecret = Callable[[str, str], Awaitable[str]]


async def agent_for(
    store: Store,
    base: AgentDefinition,
    execution: Execution,
    cache: Path,
    sandbox_secret: SandboxSecret | None = None,
) -> tuple[AgentDefinition, Limits | None]:
    """The agent of ``execution``'s snapshot and its deployment's limits (one budget for
    the execution); ``base`` and no limits for a session made without a snapshot (created
    directly in the store, as the supervisor's own tests do)."""
    if execution.snapshot_digest is None:
        return base, None
    session = await store.get_session(execution.session_id)
    if session.snapshot_digest != execution.snapshot_digest:
        raise SnapshotMismatch(
            f"execution {execution.execution_id} was created for snapshot "
            f"{execution.snapshot_digest}, its session is bound to {session.snapshot_digest}"
        )
    if session.plugin is None or session.model is None:
        return base, None
    name, _, version = session.plugin.partition("@")
    published = await store.get_plugin_version(name, version)
    if published.digest != session.plugin_digest:
        raise SnapshotMismatch(f"{session.plugin} no longer has digest {session.plugin_digest}")
    root = await materialize(store, published, cache)
    plugin = await asyncio.to_thread(read_plugin, root)
    if plugin.digest != published.digest:
        raise SnapshotMismatch(f"{root} does not hash to {published.digest}; delete it to rebuild")
    spec: dict[str, Any] = {}
    if session.deployment_digest is not None:
        spec = (await store.get_deployment_config(session.deployment_digest)).spec
    agent = agent_from_plugin(root, plugin, model=session.model, tool_overrides=spec.get("tools"))
    limits = None
    if session.deployment_digest is not None:
        limits = deployment_limits(spec.get("limits", {}), execution)
        if spec.get("sandbox_env") and spec.get("sandbox_env_confirmed"):
            agent = await _with_sandbox_env(
                agent, spec["sandbox_env"], session.workspace_id, sandbox_secret
            )
    return agent, limits


async def _with_sandbox_env(
    agent: AgentDefinition,
    entries: list[dict[str, Any]],
    workspace_id: str | None,
    secret: SandboxSecret | None,
) -> AgentDefinition:
    """The agent with a confirmed `sandbox_env` in its stdio servers' environments (in
    memory only: the definition's digest does not cover `env` values)."""
    if secret is None or workspace_id is None:
        raise RuntimeFailure(
            "the deployment puts secrets into the sandbox and this supervisor has no secret store",
            code="secret_missing",
        )
    servers = []
    for server in agent.mcp_servers:
        env = dict(server.env or {})
        for entry in entries:
            if entry["server"] == server.name and server.command is not None:
                env[entry["env"]] = await secret(workspace_id, entry["secret"])
        servers.append(dataclasses.replace(server, env=env) if env else server)
    return dataclasses.replace(agent, mcp_servers=tuple(servers))


def deployment_limits(spec: dict[str, Any], execution: Execution) -> Limits:
    """A deployment's limits as the runtime's budget; its deadline is the execution's
    (the Host set `deadline_at` from the same deployment when it created the execution)."""
    return Limits(
        max_steps=spec.get("max_steps", Limits.max_steps),
        max_tokens=spec.get("max_tokens"),
        max_cost_usd=spec.get("max_cost_usd"),
        deadline=execution.deadline_at if "deadline_seconds" in spec else None,
    )


async def materialize(store: Store, version: PluginVersion, cache: Path) -> Path:
    """The plugin's files under ``cache/<digest>``, written once."""
    target = cache / version.digest.removeprefix("sha256:")
    if await asyncio.to_thread(target.is_dir):
        return target
    files = [(f.path, f.executable, await store.blobs.read(f.sha256)) for f in version.files]
    await asyncio.to_thread(_install, cache, target, files)
    return target


def _install(cache: Path, target: Path, files: list[tuple[str, bool, bytes]]) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".part-"))
    try:
        for rel, executable, data in files:
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            os.chmod(path, 0o700 if executable else 0o600)
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # another attempt renamed the same digest first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
