"""Build the agent an execution runs from its session's execution snapshot, not from a
process-wide definition (docs/plugins.md, "Execution snapshot").

The snapshot names a published plugin version; its files are materialized from the blob
store into a cache directory keyed by the plugin digest (written aside and renamed into
place, so a crash never leaves a half-written plugin under that name), then turned into
an agent with the snapshot's model by the runtime's `agent_from_plugin`. Two executions of
one version share the directory, and a supervisor builds the agent of one snapshot once
(`Agents`): the snapshot digest covers the plugin's digest, the deployment's and the model,
so the same digest always builds the same agent. What may change under a digest is still
checked at every attempt: the session's binding and the published version's digest.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opennua.plugins import read_plugin
from opennua.runtime import AgentDefinition, Limits, RuntimeFailure, agent_from_plugin
from opennua.store import Execution, FileStore, LogStore, PluginVersion, RegistryStore


class SnapshotStore(LogStore, FileStore, RegistryStore, Protocol):
    """What binding an execution to its snapshot reads: the session, the published
    version and the deployment's configuration, and the plugin's files."""


class SnapshotMismatch(RuntimeFailure):
    """The execution was created for another snapshot than its session is bound to."""

    code = "snapshot_mismatch"


#: `(workspace_id, secret name) -> value`: how a deployment's confirmed `sandbox_env` is
#: filled (`opennua.secrets.SecretStore.get`).
SandboxSecret = Callable[[str, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Bound:
    """What an execution runs: the agent, its deployment's limits (one budget for the
    execution) and egress list (where sandboxed code may connect, through the proxy)."""

    agent: AgentDefinition
    limits: Limits | None = None
    egress: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Built:
    agent: AgentDefinition  # before any sandbox_env secret: those are read per attempt
    spec: dict[str, Any]  # the deployment's configuration


class Agents:
    """The agents a supervisor built, by execution snapshot digest (the most recent few)."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._built: collections.OrderedDict[str, _Built] = collections.OrderedDict()

    def get(self, digest: str) -> _Built | None:
        built = self._built.get(digest)
        if built is not None:
            self._built.move_to_end(digest)
        return built

    def put(self, digest: str, built: _Built) -> None:
        self._built[digest] = built
        while len(self._built) > self._size:
            self._built.popitem(last=False)


async def agent_for(
    store: SnapshotStore,
    base: AgentDefinition,
    execution: Execution,
    cache: Path,
    sandbox_secret: SandboxSecret | None = None,
    agents: Agents | None = None,
) -> Bound:
    """The agent of ``execution``'s snapshot and its deployment's limits and egress;
    ``base`` alone for a session made without a snapshot (created directly in the store,
    as the supervisor's own tests do)."""
    if execution.snapshot_digest is None:
        return Bound(base)
    session = await store.get_session(execution.session_id)
    if session.snapshot_digest != execution.snapshot_digest:
        raise SnapshotMismatch(
            f"execution {execution.execution_id} was created for snapshot "
            f"{execution.snapshot_digest}, its session is bound to {session.snapshot_digest}"
        )
    if session.plugin is None or session.model is None:
        return Bound(base)
    name, _, version = session.plugin.partition("@")
    published = await store.get_plugin_version(name, version)
    if published.digest != session.plugin_digest:
        raise SnapshotMismatch(f"{session.plugin} no longer has digest {session.plugin_digest}")
    built = agents.get(execution.snapshot_digest) if agents is not None else None
    if built is None:
        built = await _build(store, published, session.model, session.deployment_digest, cache)
        if agents is not None:
            agents.put(execution.snapshot_digest, built)
    agent, spec = built.agent, built.spec
    limits = None
    if session.deployment_digest is not None:
        limits = deployment_limits(spec.get("limits", {}), execution)
        if spec.get("sandbox_env") and spec.get("sandbox_env_confirmed"):
            agent = await _with_sandbox_env(
                agent, spec["sandbox_env"], session.workspace_id, sandbox_secret
            )
    return Bound(agent, limits, tuple(spec.get("egress", ())))


async def _build(
    store: SnapshotStore,
    published: PluginVersion,
    model: str,
    deployment_digest: str | None,
    cache: Path,
) -> _Built:
    """The agent of a published plugin version, a model and a deployment's configuration."""
    root = await materialize(store, published, cache)
    name, version = published.name, published.version
    plugin = await asyncio.to_thread(read_plugin, root, name=name, version=version)
    if plugin.digest != published.digest:
        raise SnapshotMismatch(f"{root} does not hash to {published.digest}; delete it to rebuild")
    spec: dict[str, Any] = {}
    if deployment_digest is not None:
        spec = (await store.get_deployment_config(deployment_digest)).spec
    agent = agent_from_plugin(
        root,
        plugin,
        model=model,
        tool_overrides=spec.get("tools"),
        model_aliases=spec.get("model_aliases"),
        env=spec.get("env"),
    )
    return _Built(agent, spec)


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
        secrets = {
            entry["env"]: await secret(workspace_id, entry["secret"])
            for entry in entries
            if entry["server"] == server.name and server.command is not None
        }
        if not secrets:
            servers.append(server)
            continue
        # In its environment, for `${NAME}` in its command line and env, and never shown
        # in what the turn records of the server (its stderr).
        servers.append(
            dataclasses.replace(
                server,
                env={**(server.env or {}), **secrets},
                variables={**(server.variables or {}), **secrets},
                secret_values=secrets,
            )
        )
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


async def materialize(store: FileStore, version: PluginVersion, cache: Path) -> Path:
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
    # Readable by all: it is published code, mounted read-only for a sandbox that may run
    # as another user (SANDBOX_UID, when the server is root); the data directory around
    # it stays the server's alone (0700).
    os.chmod(staging, 0o755)
    try:
        for rel, executable, data in files:
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            os.chmod(path, 0o755 if executable else 0o644)
        for directory, _, _ in os.walk(staging):
            os.chmod(directory, 0o755)  # whatever the umask
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # another attempt renamed the same digest first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
