"""The plugin registry's rules over the store: what a publish, a release, a rollback and a
deployment must satisfy, and how a session's execution snapshot is resolved
(docs/plugins.md, "Registry", "Deployments", "Execution snapshot").

Files are uploaded to the blob store first (content-addressed, so a re-publish uploads
only what changed); a publish then names them by path and sha256. Everything is checked
before the one store write that makes the version visible.

Which contents a publish may name, and their upload, are `_plugin_files`'s.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from opennua.host._egress import EgressRule
from opennua.plugins import (
    MANIFEST,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    Plugin,
    PluginError,
    Problem,
    UndefinedVariable,
    builtin_plugin_root,
    expand_variables,
    never_published,
    read_plugin,
    undefined_variables,
    unmapped_aliases,
    unsupported_tool,
)
from opennua.protocol.intents import NAME_PATTERN
from opennua.store import (
    AuthStore,
    ChannelMove,
    DeploymentRecord,
    FileStore,
    InvalidInput,
    NotFound,
    PluginFile,
    PluginVersion,
    RegistryStore,
    SealedSecretStore,
    Visibility,
    WriteConflict,
    channel_target,
)

from ._plugin_files import DEFAULT_WORKSPACE_QUOTA, PluginFiles
from ._refused import Refused


class RegistrySources(FileStore, RegistryStore, AuthStore, SealedSecretStore, Protocol):
    """What the registry checks and writes: versions, channels, deployments and their
    files, who may publish, and the secrets a deployment names."""


DEFAULT_DEPLOYMENT = "default"
#: A deployment's `principal_id` from before principals: the workspace's owner.
OWNER_PLACEHOLDER = "prn_owner"
DEFAULT_CHANNEL = "stable"
log = logging.getLogger("opennua.host")

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


# -- digests -------------------------------------------------------------------------------


def _json_digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


# -- deployments -----------------------------------------------------------------------------


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeploymentLimits(_Spec):
    """One budget per execution, shared by the agent and all its sub-agents."""

    deadline_seconds: Annotated[float, Field(gt=0, le=7 * 86400)] | None = None
    max_steps: Annotated[int, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None


class ToolOverride(_Spec):
    """Replaces how one of the plugin's MCP servers (by its `.mcp.json` name) is reached."""

    # Printable ASCII (a URL is percent-encoded): `\S` would differ between Python's
    # regex (U+0085 is space) and the ECMA regex clients validate the schema with.
    url: Annotated[str, StringConstraints(pattern=r"^https?://[!-~]+$")] | None = None
    command: str | None = None
    args: list[str] | None = None
    #: The turn fails when this server cannot start (by default it goes on without it).
    required: bool | None = None


#: A secret's name (opennua.secrets.NAME_PATTERN; the Host does not import the secrets).
SecretName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
#: An MCP server's name as `.mcp.json` spells it (`"google calendar"`): one line of text.
ServerName = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]{1,128}$")]


class CredentialRef(_Spec):
    """One credential of one tool connection, by reference: the gateway sends
    `<header>: <prefix><value of secret>` to that MCP server, and to no other host."""

    server: ServerName
    secret: SecretName
    header: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,64}$")] = "Authorization"
    prefix: Annotated[str, StringConstraints(pattern=r"^[!-~ ]{0,32}$")] = "Bearer "


class SandboxSecret(_Spec):
    """A secret put into a stdio MCP server's environment, inside the sandbox. Outside
    the gateway's guarantee: code in the sandbox (that server) can read it."""

    server: ServerName
    env: Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]{0,63}$")]
    secret: SecretName


#: A `provider:model` string, as `model` takes it.
ModelName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]+:\S+$", max_length=200)]
#: A variable `${NAME}` in `.mcp.json` may name (the shell's rule).
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
AliasName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9._-]{0,63}$")]


def _egress_entry(text: str) -> str:
    EgressRule.parse(text)  # EgressRuleError is a ValueError: a validation error
    return text.strip()


#: `HOST:PORT` (host/_egress.py): where sandboxed code may connect through the proxy.
EgressEntry = Annotated[
    str,
    # The shape only (printable ASCII, as for a URL); what it means is checked by parsing.
    StringConstraints(pattern=r"^[!-~]+:[0-9]{1,5}(-[0-9]{1,5})?$", max_length=300),
    AfterValidator(_egress_entry),
]


class DeploymentSpec(_Spec):
    """What `PUT /v1/deployments/{name}` and `nua deploy` take. At most one of `channel`
    and `version`; neither means the `stable` channel."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={"not": {"required": ["channel", "version"]}},
    )

    plugin: Name
    channel: Name | None = None
    version: str | None = None
    model: ModelName
    #: What a sub-agent's `model: opus|sonnet|haiku` means here (Claude Code's aliases);
    #: an alias left out takes the default for the model's provider (`plugins._aliases`).
    model_aliases: dict[AliasName, ModelName] = Field(default_factory=dict, max_length=32)
    #: What `${NAME}` in the plugin's `.mcp.json` names (not secrets: they are
    #: `sandbox_env` or `credentials`). Shown to whoever may read the deployment.
    #: A value holds no NUL: no process environment can carry one (it would fail the
    #: server's start at every turn instead of the save here).
    env: dict[
        EnvName, Annotated[str, StringConstraints(max_length=4096, pattern=r"^[^\x00]*$")]
    ] = Field(default_factory=dict, max_length=128)
    #: The execution principal of automated turns (schedules, hooks), and of every turn
    #: when `run_as` is `principal`. `prn_owner`: the owner of the deployment's workspace.
    principal_id: str = OWNER_PLACEHOLDER
    #: Whose rights and bill a person's turn runs on: theirs (`caller`, the default) or
    #: `principal_id`'s (the person is then the trigger only, recorded, granting nothing).
    run_as: Literal["caller", "principal"] = "caller"
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    #: References only (server, header, secret name): the gateway resolves a secret when
    #: a call to that server needs it; no value is ever part of a deployment.
    credentials: list[CredentialRef] = Field(default_factory=list, max_length=64)
    #: Off by default. Secrets in a sandboxed server's environment are a different
    #: exposure than the gateway's: saved only with `sandbox_env_confirmed` (by an admin,
    #: who alone may save a deployment), and shown as such.
    sandbox_env: list[SandboxSecret] = Field(default_factory=list, max_length=64)
    sandbox_env_confirmed: bool = False
    limits: DeploymentLimits = Field(default_factory=DeploymentLimits)
    #: Where sandboxed code (`shell`, stdio MCP servers) may connect, through the egress
    #: proxy: `HOST:PORT` entries. Empty: no network at all. Saved by admins only (as
    #: every deployment), so naming a private address is an admin's decision; the
    #: plugin's own `egress` is a request shown beside it, never enforced for this.
    egress: list[EgressEntry] = Field(default_factory=list, max_length=128)


def deployment_digest(name: str, spec: DeploymentSpec, workspace_id: str | None = None) -> str:
    # The workspace is part of what a configuration is: the same spec saved in two
    # workspaces is two configurations (each readable by its digest from its own).
    doc = {"name": name, **spec.model_dump(mode="json")}
    # A deployment from before these fields keeps its digest.
    for key in ("egress", "model_aliases", "env"):
        if not doc[key]:
            del doc[key]
    for tool in doc["tools"].values():
        if not tool["required"]:
            del tool["required"]
    if workspace_id is not None:
        doc["workspace_id"] = workspace_id
    return _json_digest(doc)


# -- the execution snapshot -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSnapshot:
    """What a session is bound to at creation; every execution of it runs this."""

    plugin: str
    version: str
    plugin_digest: str
    deployment: str
    deployment_digest: str
    model: str

    @property
    def digest(self) -> str:
        return _snapshot_digest(
            self.plugin, self.version, self.plugin_digest, self.deployment_digest, self.model
        )


@functools.lru_cache(maxsize=256)
def _snapshot_digest(
    plugin: str, version: str, plugin_digest: str, deployment_digest: str, model: str
) -> str:
    # Every new session binds one (a webhook's too): few distinct ones, each hashed once.
    return _json_digest(
        {
            "plugin": plugin,
            "version": version,
            "plugin_digest": plugin_digest,
            "deployment_digest": deployment_digest,
            "model": model,
        }
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    version: PluginVersion
    #: False: this exact version was already published (the same digest).
    created: bool
    #: The plugin's warnings and the features opennua does not run, said at publish.
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginSummary:
    name: str
    versions: list[PluginVersion]
    #: channel -> the version it points at now
    channels: dict[str, str]
    history: list[ChannelMove]


# -- who sees what ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """A principal acting in a workspace: whose view of the registry a request has. The
    methods below take None for the server itself, which sees everything (it publishes
    the built-in plugin; supervisors rebuild any session's snapshot)."""

    workspace_id: str
    principal_id: str

    def sees(self, v: PluginVersion) -> bool:
        if v.workspace_id is None:
            return True  # server-wide: the built-in plugin
        if v.workspace_id != self.workspace_id:
            return False
        return v.visibility == "workspace" or v.publisher_id == self.principal_id

    def sees_deployment(self, d: DeploymentRecord) -> bool:
        return d.workspace_id is None or d.workspace_id == self.workspace_id


def _hidden(kind: str, key: str) -> Refused:
    # Another workspace's (or another publisher's private) plugin is as absent as one that
    # does not exist: its existence does not leak.
    return Refused("not_found", f"{kind} {key} not found")


# -- the registry --------------------------------------------------------------------------


class Registry:
    def __init__(
        self,
        store: RegistrySources,
        *,
        clock: Callable[[], float] = time.time,
        workspace_quota: int | None = DEFAULT_WORKSPACE_QUOTA,
        priced: Callable[[str], bool] | None = None,
    ) -> None:
        """`priced(model)`: whether a cost limit can be enforced for that model (the
        runtime's `model_priced`); None: not checked."""
        self.store = store
        self._clock = clock
        self._priced = priced
        #: Uploads of plugin files, and which ones a scope may name.
        self.files = PluginFiles(store, clock=clock, workspace_quota=workspace_quota)
        self._specs: dict[str, DeploymentSpec] = {}
        self._versions: dict[tuple[str, str], PluginVersion] = {}
        #: (name, version, digest) -> the version as read (a version without a manifest
        #: takes its name and version from the publish, not from its bytes).
        self._plugins: dict[tuple[str, str, str], Plugin] = {}

    async def publish(
        self,
        files: Sequence[PluginFile],
        *,
        scope: Scope | None = None,
        visibility: Visibility = "workspace",
        name: str | None = None,
        version: str | None = None,
    ) -> Published:
        """Register the uploaded files as one version, checked by the plugin format's own
        reader (the same rules as `nua plugin validate`), so what is published runs. It
        belongs to the scope's workspace (visible there, or to its publisher only when
        `private`); the server's own publish (no scope) is server-wide. `name` and
        `version`: the publisher's, where the manifest does not say them (a version
        neither gives is derived from the content)."""
        # Everything the listing says is checked before a byte is read or written: its
        # count and sizes, that the scope may name each content, and its size.
        _check_listing(files)
        sizes = await self.files.reachable(scope, {f.sha256 for f in files})
        for f in files:
            if f.sha256 not in sizes:
                # The request is well formed; the server's state lacks what it names (also
                # when another workspace has those bytes: that is not for this one to know).
                raise Refused("files_missing", f"{f.path}: its content was not uploaded first")
            if sizes[f.sha256] not in (None, f.size):
                raise _wrong_size(f)
        if name is None and not any(f.path == MANIFEST for f in files):
            raise Refused(
                "invalid_plugin",
                f"no {MANIFEST}: give the plugin's name (`name`; nua plugin publish sends "
                "its directory's)",
                file=MANIFEST,
            )
        with tempfile.TemporaryDirectory(prefix="nua-publish-") as staging:
            root = Path(staging) / "plugin"
            for f in files:
                data = await self.store.blobs.read(f.sha256)
                if len(data) != f.size:
                    raise _wrong_size(f)
                try:
                    await asyncio.to_thread(_write_file, root / f.path, data, f.executable)
                except (OSError, ValueError) as exc:  # a name this file system cannot hold
                    raise Refused("invalid_plugin", f"{f.path!r}: {exc}") from exc
            try:
                plugin = await asyncio.to_thread(
                    functools.partial(read_plugin, root, name=name, version=version)
                )
            except PluginError as exc:
                where = {"file": exc.file, "line": exc.line}
                problems = [problem_doc(p) for p in exc.problems]
                raise Refused("invalid_plugin", str(exc), **where, problems=problems) from exc
        record = PluginVersion(
            name=plugin.name,
            version=plugin.version,
            digest=plugin.digest,
            description=plugin.description,
            files=tuple(sorted(files, key=lambda f: f.path)),
            published_at=self._clock(),
            workspace_id=scope.workspace_id if scope else None,
            publisher_id=scope.principal_id if scope else None,
            visibility=visibility,
        )
        try:
            stored, created = await self.store.publish_plugin(record)
        except InvalidInput as exc:
            raise Refused("files_missing", exc.reason) from exc
        except WriteConflict as exc:
            if exc.kind == "plugin name":
                raise Refused("name_taken", f"plugin name {exc.key!r} {exc.reason}") from exc
            raise Refused("version_exists", f"{exc.key} {exc.reason}") from exc
        if created:
            self._plugins[(stored.name, stored.version, stored.digest)] = plugin
        return Published(version=stored, created=created, problems=plugin.problems)

    async def publish_dir(self, root: Path) -> Published:
        """Publish a plugin directory on this machine (the built-in plugin)."""
        plugin = await asyncio.to_thread(read_plugin, root)
        for f in plugin.files:
            await self.store.blobs.put(await asyncio.to_thread((root / f.path).read_bytes))
        files = [
            PluginFile(path=f.path, sha256=f.sha256, size=f.size, executable=f.executable)
            for f in plugin.files
        ]
        return await self.publish(files)

    # -- reads (what the surfaces show) --------------------------------------------------

    async def plugins(self, scope: Scope | None = None) -> list[PluginSummary]:
        """The plugins the scope sees (with at least one version it sees)."""
        out = []
        for name in await self.store.list_plugins():
            try:
                out.append(await self.plugin(name, scope))
            except Refused:
                continue
        return out

    async def plugin(self, name: str, scope: Scope | None = None) -> PluginSummary:
        try:
            versions = await self.store.list_plugin_versions(name)
        except NotFound as exc:
            raise _hidden("plugin", name) from exc
        if scope is not None:
            versions = [v for v in versions if scope.sees(v)]
        if not versions:
            raise _hidden("plugin", name)
        moves = await self.store.channel_history(name)
        by_channel: dict[str, list[ChannelMove]] = {}
        for m in moves:
            by_channel.setdefault(m.channel, []).append(m)
        channels = {c: t for c, ms in by_channel.items() if (t := channel_target(ms)) is not None}
        return PluginSummary(name=name, versions=versions, channels=channels, history=moves)

    async def version(self, name: str, version: str, scope: Scope | None = None) -> PluginVersion:
        try:
            found = await self._version(name, version)
        except NotFound as exc:
            raise _hidden("plugin version", f"{name}@{version}") from exc
        if scope is not None and not scope.sees(found):
            raise _hidden("plugin version", f"{name}@{version}")
        return found

    async def deployments(self, scope: Scope | None = None) -> list[DeploymentRecord]:
        found = await self.store.list_deployments()
        return [d for d in found if scope is None or scope.sees_deployment(d)]

    async def deployment(self, name: str, scope: Scope | None = None) -> DeploymentRecord:
        try:
            found = await self.store.get_deployment(name)
        except NotFound as exc:
            raise _hidden("deployment", name) from exc
        if scope is not None and not scope.sees_deployment(found):
            raise _hidden("deployment", name)
        return found

    async def egress_request(
        self, spec: DeploymentSpec | PluginVersion, scope: Scope | None = None
    ) -> list[str] | None:
        """What a plugin version (a deployment's, now) asks sandboxed code to reach: its
        `egress` setting, a request shown at deploy time; the deployment's own `egress`
        is what is enforced. None: the plugin says nothing."""
        try:
            version = spec if isinstance(spec, PluginVersion) else await self._target(spec, scope)
            requested = (await self.plugin_of(version)).settings.access.egress
        except (NotFound, Refused):
            return None  # the channel's target is gone: nothing to show
        return None if requested is None else list(requested)

    async def problems(self, spec: DeploymentSpec, scope: Scope | None = None) -> list[Problem]:
        """What the deployment leaves its plugin version without (`deployment_problems`),
        now: a channel's target may have moved since it was saved."""
        try:
            plugin = await self.plugin_of(await self._target(spec, scope))
        except (NotFound, Refused):
            return []  # the channel's target is gone: nothing to show
        return deployment_problems(plugin, spec)

    # -- writes ------------------------------------------------------------------------

    async def release(
        self, name: str, channel: str, version: str, scope: Scope | None = None
    ) -> ChannelMove:
        _check_name(channel, "channel")
        await self._writable(name, scope)
        if scope is not None:
            await self.version(name, version, scope)
        try:
            return await self.store.release_plugin(name, channel, version, self._clock())
        except NotFound as exc:
            raise Refused("not_found", f"{name}@{version} is not published") from exc

    async def rollback(self, name: str, channel: str, scope: Scope | None = None) -> ChannelMove:
        await self._writable(name, scope)
        try:
            return await self.store.rollback_plugin(name, channel, self._clock())
        except WriteConflict as exc:
            raise Refused("no_earlier_release", f"{name} channel {channel} {exc.reason}") from exc

    async def _writable(self, name: str, scope: Scope | None) -> None:
        """Channels move only in the plugin's own workspace (the server moves its own)."""
        if scope is None:
            return
        summary = await self.plugin(name, scope)
        if summary.versions[0].workspace_id is None:
            raise Refused("forbidden", f"plugin {name!r} is the server's own: its channels are not")

    async def deploy(
        self, name: str, spec: DeploymentSpec, scope: Scope | None = None
    ) -> DeploymentRecord:
        """Validate ``spec`` against the registry now, as the scope sees it, and save it
        under its digest, in the scope's workspace. Its credential references must name
        secrets of that workspace."""
        _check_name(name, "deployment")
        if spec.channel is not None and spec.version is not None:
            raise Refused("invalid_deployment", "give a channel or a pinned version, not both")
        try:
            version = await self._target(spec, scope)
        except NotFound as exc:
            # Well formed, but the registry has no such thing (yet): a state conflict.
            raise Refused(
                "deployment_unresolvable", f"{exc.kind} {exc.key} does not exist"
            ) from exc
        cap = spec.limits.max_cost_usd
        if cap is not None and self._priced is not None and not self._priced(spec.model):
            # It would fail every turn after the first response, not here where it is set.
            raise Refused(
                "invalid_deployment",
                f"max_cost_usd cannot be enforced: no price is known for {spec.model}; "
                "deploy without --max-cost (and cap steps or tokens instead), or choose a "
                "model with a known price",
            )
        plugin = await self.plugin_of(version)
        agents = {a.name for a in plugin.a2a_agents}
        servers = {s.name for s in plugin.mcp_servers} | agents
        where = f"{version.name}@{version.version}"
        unknown = sorted(set(spec.tools) - servers)
        unknown += sorted({c.server for c in spec.credentials} - servers - set(unknown))
        unknown += sorted({e.server for e in spec.sandbox_env} - servers - set(unknown))
        if unknown:
            raise Refused(
                "invalid_deployment",
                f"tools: {', '.join(unknown)} is not an MCP server or A2A agent of "
                f"{where} (it has: {_names(servers)})",
            )
        for agent in sorted(agents & set(spec.tools)):
            override = spec.tools[agent]
            if override.command is not None or override.args is not None:
                raise Refused(
                    "invalid_deployment",
                    f"tools: {agent} is an A2A agent: give it a url, not a command",
                )
        workspace_id = scope.workspace_id if scope else None
        remote = remote_urls(plugin, spec)
        if spec.sandbox_env and not spec.sandbox_env_confirmed:
            raise Refused(
                "invalid_deployment",
                "sandbox_env puts secrets where code in the sandbox can read them, outside "
                "the gateway's guarantee: confirm it with sandbox_env_confirmed "
                "(nua deploy --confirm-sandbox-exposure)",
            )
        for ref in spec.credentials:
            if ref.server not in remote:
                # Credentials travel only through the gateway, which a local server never
                # calls through: accepting one would show a credential that is never sent.
                raise Refused(
                    "invalid_deployment",
                    f"credentials: {ref.server} is a local (stdio) server, and credentials "
                    "reach only remote servers through the gateway; put the secret in its "
                    f"environment with --sandbox-secret {ref.server}:ENV={ref.secret} "
                    "--confirm-sandbox-exposure (readable by code in the sandbox), or reach "
                    f"it remotely with --tool {ref.server}=URL",
                )
        for entry in spec.sandbox_env:
            if entry.server in remote:
                raise Refused(
                    "invalid_deployment",
                    f"sandbox_env: {entry.server} is a remote server; give it a credential",
                )
        for server, url in remote.items():
            host = urlsplit(url).hostname or ""
            if not plugin.settings.access.allows_host(host):
                kind = "A2A agent" if server in agents else "MCP server"
                raise Refused(
                    "egress_denied",
                    f"{kind} {server} at {host} is not in {where}'s egress list",
                    host=host,
                )
        if workspace_id is not None:
            wanted = [c.secret for c in spec.credentials] + [e.secret for e in spec.sandbox_env]
            found = await self.store.existing_secrets(workspace_id, wanted)
            for missing in (n for n in wanted if n not in found):
                raise Refused(
                    "secret_missing",
                    f"credentials: no secret named {missing!r} in this workspace "
                    f"(set it with `nua secret set {missing}`)",
                    secret=missing,
                )
        record = DeploymentRecord(
            name=name,
            digest=deployment_digest(name, spec, workspace_id),
            spec=spec.model_dump(mode="json", exclude_none=True),
            created_at=self._clock(),
            workspace_id=workspace_id,
        )
        try:
            return await self.store.put_deployment(record)
        except WriteConflict as exc:
            raise Refused("name_taken", f"deployment name {name!r} {exc.reason}") from exc

    async def _target(self, spec: DeploymentSpec, scope: Scope | None = None) -> PluginVersion:
        """The version a spec names, as the scope sees it (an unseen one does not exist)."""
        version = spec.version
        if version is None:
            version = await self.store.resolve_channel(spec.plugin, spec.channel or DEFAULT_CHANNEL)
        found = await self._version(spec.plugin, version)
        if scope is not None and not scope.sees(found):
            raise NotFound("plugin version", f"{spec.plugin}@{version}")
        return found

    async def _version(self, name: str, version: str) -> PluginVersion:
        # A published version never changes: read its (possibly long) file list once.
        found = self._versions.get((name, version))
        if found is None:
            found = await self.store.get_plugin_version(name, version)
            self._versions[(name, version)] = found
        return found

    async def plugin_of(self, version: PluginVersion) -> Plugin:
        """A published version as the plugin format reads it (its servers, its access
        policy). Read once: a published version never changes."""
        key = (version.name, version.version, version.digest)
        found = self._plugins.get(key)
        if found is None:
            with tempfile.TemporaryDirectory(prefix="nua-plugin-") as staging:
                root = Path(staging)
                for f in version.files:
                    data = await self.store.blobs.read(f.sha256)
                    await asyncio.to_thread(_write_file, root / f.path, data, f.executable)
                read = functools.partial(
                    read_plugin, root, name=version.name, version=version.version
                )
                try:
                    found = await asyncio.to_thread(read)
                except PluginError as exc:  # published by a newer, laxer opennua
                    raise Refused("invalid_plugin", str(exc)) from exc
            self._plugins[key] = found
        return found

    async def resolve(
        self,
        deployment: str,
        scope: Scope | None = None,
        *,
        record: DeploymentRecord | None = None,
    ) -> ExecutionSnapshot:
        """deployment → channel → version, once: the snapshot a new session is bound to.
        A scope uses only its workspace's deployments and the versions it sees. `record`:
        the deployment named `deployment` as the caller has just read it."""
        try:
            if record is None or record.name != deployment:
                record = await self.deployment(deployment, scope)
            elif scope is not None and not scope.sees_deployment(record):
                raise _hidden("deployment", deployment)
        except Refused as exc:
            raise Refused("not_found", f"no deployment named {deployment!r}") from exc
        spec = self._spec(record)
        try:
            version = await self._target(spec, scope)
        except NotFound as exc:
            raise Refused(
                "deployment_unresolvable",
                f"deployment {deployment!r}: {exc.kind} {exc.key} is gone or not yours to see",
            ) from exc
        return ExecutionSnapshot(
            plugin=version.name,
            version=version.version,
            plugin_digest=version.digest,
            deployment=record.name,
            deployment_digest=record.digest,
            model=spec.model,
        )

    async def spec_of(self, deployment_digest: str | None) -> DeploymentSpec | None:
        """A session's deployment configuration. Configurations never change under their
        digest, so each is read once per process."""
        if deployment_digest is None:
            return None
        spec = self._specs.get(deployment_digest)
        if spec is None:
            spec = self._spec(await self.store.get_deployment_config(deployment_digest))
        return spec

    def _spec(self, record: DeploymentRecord) -> DeploymentSpec:
        # A configuration never changes under its digest: validated once per process.
        spec = self._specs.get(record.digest)
        if spec is None:
            spec = self._specs[record.digest] = DeploymentSpec.model_validate(record.spec)
        return spec

    async def ensure_builtin(self, model: str) -> None:
        """Publish the built-in plugin and keep the `default` deployment on it, so a session
        without a deployment takes the same path as one with."""
        try:
            published = (await self.publish_dir(builtin_plugin_root())).version
        except Refused as exc:
            if exc.code != "version_exists":
                raise
            # Built-in files changed without a version bump: keep serving the published
            # version (sessions must be able to rebuild it) rather than refuse to start.
            log.warning("built-in plugin not republished: %s", exc.detail)
            name = (await asyncio.to_thread(read_plugin, builtin_plugin_root())).name
            published = (await self.store.list_plugin_versions(name))[-1]
        name = published.name
        try:
            current: str | None = await self.store.resolve_channel(name, DEFAULT_CHANNEL)
        except NotFound:
            current = None
        if current != published.version:
            await self.release(name, DEFAULT_CHANNEL, published.version)
        spec = DeploymentSpec(plugin=name, channel=DEFAULT_CHANNEL, model=model)
        try:
            deployed: str | None = (await self.store.get_deployment(DEFAULT_DEPLOYMENT)).digest
        except NotFound:
            deployed = None
        if deployed != deployment_digest(DEFAULT_DEPLOYMENT, spec):
            await self.deploy(DEFAULT_DEPLOYMENT, spec)


def remote_urls(plugin: Plugin, spec: DeploymentSpec) -> dict[str, str]:
    """Where each remote MCP server and A2A agent of a deployment is: the plugin's URL
    (`.mcp.json`, `.a2a.json`; its `${VAR}`s from the deployment's `env`), or the
    deployment's `tools` override. A server with no URL yet (a placeholder, or a variable
    nothing defines) is not reachable."""
    out = {}
    named: list[tuple[str, str | None]] = [(s.name, s.url) for s in plugin.mcp_servers]
    named += [(a.name, a.url) for a in plugin.a2a_agents]
    for name, own in named:
        override = spec.tools.get(name)
        url = override.url if override is not None and override.url else own
        if not url or (override is not None and override.command is not None):
            continue
        try:
            out[name] = expand_variables(url, spec.env)
        except UndefinedVariable:
            continue
    return out


def deployment_problems(plugin: Plugin, spec: DeploymentSpec) -> list[Problem]:
    """What a deployment leaves the plugin without, as warnings: servers that need
    configuring (no URL, or a `${VAR}` nothing defines) run without, Claude Code tools
    opennua does not have, and sub-agents' model aliases nothing maps run the deployment's
    model."""
    problems = []
    for server in plugin.mcp_servers:
        override = spec.tools.get(server.name)
        if override is not None and (override.url or override.command):
            texts = [override.url or "", override.command or "", *(override.args or [])]
        elif not server.configured:
            problems.append(
                Problem(
                    "warning",
                    f"MCP server {server.name!r} has no URL and runs without one: give it "
                    f"with `nua deploy --mcp-url {server.name}=URL`",
                    file=".mcp.json",
                )
            )
            continue
        else:
            texts = [server.url or "", server.command or "", *server.args, *server.env.values()]
        given = set(spec.env) | {e.env for e in spec.sandbox_env if e.server == server.name}
        for name in undefined_variables(texts, {n: "" for n in given}):
            problems.append(
                Problem(
                    "warning",
                    f"MCP server {server.name!r} needs ${{{name}}}, which nothing defines: "
                    f"it runs without that server until `nua deploy --env {name}=…` (or a "
                    "sandbox secret of that name) gives it",
                    file=".mcp.json",
                )
            )
    for remote in plugin.a2a_agents:
        override = spec.tools.get(remote.name)
        if not remote.configured and not (override is not None and override.url):
            problems.append(
                Problem(
                    "warning",
                    f"A2A agent {remote.name!r} has no URL and runs without one: give it "
                    f"with `nua deploy --tool {remote.name}=URL`",
                    file=".a2a.json",
                )
            )
    # Said at validation too; said again where the deployment is decided, never silently.
    named = [(a.path, a.tools or ()) for a in plugin.agents]
    named += [(f"{k.path}/SKILL.md", k.allowed_tools) for k in plugin.skills]
    for path, tools in named:
        for tool in sorted({t for t in tools if unsupported_tool(t)}):
            problems.append(
                Problem(
                    "warning",
                    f"tool {tool} is not supported by opennua; this deployment runs without it",
                    file=path,
                )
            )
    for agent in plugin.agents:
        for alias in unmapped_aliases([agent.model], spec.model, spec.model_aliases):
            problems.append(
                Problem(
                    "warning",
                    f"sub-agent {agent.name!r} asks for model {alias!r}, which this "
                    f"deployment does not map and {spec.model.partition(':')[0]} has no "
                    f"default for: it runs {spec.model} (map it with `nua deploy "
                    f"--model-alias {alias}=provider:model`)",
                    file=agent.path,
                )
            )
    return problems


def problem_doc(problem: Problem) -> dict[str, Any]:
    """A plugin's problem as problem JSON's `problems` and a version's document list it."""
    return {
        "severity": problem.severity,
        "message": problem.message,
        "file": problem.file,
        "line": problem.line,
    }


def _check_name(value: str, what: str) -> None:
    if not re.match(NAME_PATTERN, value):
        raise Refused("invalid_" + ("deployment" if what == "deployment" else "plugin"),
                      f"{what} name {value!r} must match {NAME_PATTERN}")  # fmt: skip


def _wrong_size(f: PluginFile) -> Refused:
    return Refused("invalid_plugin", f"{f.path}: listed as {f.size} bytes, is not")


def _check_listing(files: Sequence[PluginFile]) -> None:
    """Paths stay inside the staging directory, and the listing within the format's
    limits (count, each file, in all: a publish writes what it lists); the format's reader
    checks the rest."""
    if not files:
        raise Refused("invalid_plugin", "a plugin has at least its manifest")
    if len(files) > MAX_FILES:
        raise Refused("plugin_too_large", f"more than {MAX_FILES} files")
    total = sum(f.size for f in files)
    if total > MAX_TOTAL_BYTES:
        raise Refused(
            "plugin_too_large",
            f"the listing names {total} bytes in all, over the limit of {MAX_TOTAL_BYTES}",
        )
    by_path: dict[str, PluginFile] = {}
    for f in files:
        parts = f.path.split("/")
        control = any(ord(c) < 0x20 or ord(c) == 0x7F for c in f.path)
        if (
            f.path.startswith("/")
            or "\\" in f.path
            or control
            or any(p in ("", ".", "..") for p in parts)
        ):
            raise Refused("invalid_plugin", f"{f.path!r}: not a relative path inside the plugin")
        if never_published(f.path):
            raise Refused(
                "invalid_plugin",
                f"{f.path}: version control and byte code are never part of a plugin "
                "(what runs is the source its digest covers); leave it out",
            )
        if f.path in by_path:
            raise Refused("invalid_plugin", f"{f.path}: listed twice")
        if f.size > MAX_FILE_BYTES:
            raise Refused("plugin_too_large", f"{f.path}: larger than {MAX_FILE_BYTES} bytes")
        by_path[f.path] = f


def _write_file(path: Path, data: bytes, executable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def _names(values: set[str]) -> str:
    return ", ".join(sorted(values)) or "none"


async def execution_principal(store: AuthStore, spec: DeploymentSpec, workspace_id: str) -> str:
    """The principal a deployment's turns run as in `workspace_id` (when they run as its
    principal): `principal_id`, the placeholder resolved to the workspace's first owner."""
    if spec.principal_id != OWNER_PLACEHOLDER:
        return spec.principal_id
    try:
        await store.get_principal(spec.principal_id)
        return spec.principal_id
    except NotFound:
        pass
    owners = sorted(
        m.principal_id
        for m in await store.list_memberships(workspace_id=workspace_id)
        if m.role == "owner"
    )
    if not owners:
        raise Refused("not_found", "the workspace has no owner to run as")
    return owners[0]
