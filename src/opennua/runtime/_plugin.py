"""An agent definition from a plugin directory (docs/plugins.md, "The runtime side").

Progressive disclosure: the model's context holds each skill's name and description only
(in the `skill` tool's description); the `skill` tool loads a body, or one resource by a
path confined to that skill's folder. The `task` tool starts a plugin's sub-agent by name.
The plugin's code never runs in this process: its stdio MCP servers are subprocesses started
with the plugin directory as `${PLUGIN_ROOT}`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opennua.plugins import (
    CLAUDE_TOOL_NAMES,
    McpServerSpec,
    Plugin,
    PluginError,
    Skill,
    SubAgent,
    UndefinedVariable,
    builtin_plugin_root,
    claude_tool,
    expand_variables,
    model_of_alias,
    read_plugin,
)
from opennua.runtime._a2a import A2aAgent
from opennua.runtime._agent import AgentDefinition, SubAgentDefinition
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._errors import ToolError
from opennua.runtime._hooks import HookSet
from opennua.runtime._mcp import McpServer
from opennua.runtime._models import model_from_env
from opennua.runtime._tools import Tool, make_tool


def agent_from_plugin(
    root: Path | str,
    plugin: Plugin,
    *,
    model: str | None = None,
    tool_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    model_aliases: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> AgentDefinition:
    """The agent `plugin` (read from `root`) defines; `model` defaults to `NUA_MODEL` or
    `scripted:demo`. The rest is a deployment's: `tool_overrides` its `tools` (per
    `.mcp.json` server name, a `url`, or a `command` and `args`, that replace how that
    server is reached, and `required`); `model_aliases` what a sub-agent's `model: opus`
    means; `env` what `${VAR}` in `.mcp.json` names. A server without a URL (a placeholder
    the deployment did not fill) is left out. Raises `PluginError` for a remote MCP server
    the egress list refuses."""
    root = Path(root).resolve()
    model = model or model_from_env()
    overrides = tool_overrides or {}
    servers = [_overridden(spec, overrides.get(spec.name)) for spec in plugin.mcp_servers]
    tools = [_task_tool(plugin.agents) if t.name == "task" else t for t in BUILTIN_TOOLS]
    if plugin.skills:
        tools.append(_skill_tool(root, plugin.skills))
    policy = plugin.settings.access
    return AgentDefinition(
        name=plugin.name,
        instructions=plugin.settings.instructions.strip()
        or f"You are {plugin.name}. {plugin.description}".strip(),
        model=model,
        tools=tuple(tools),
        mcp_servers=tuple(
            _server(root, spec, plugin, overrides.get(spec.name), env)
            for spec in servers
            if spec.configured
        ),
        subagents=tuple(_subagent(a, servers, model, model_aliases) for a in plugin.agents),
        allowed_tools=policy.allowed_tools,
        approval_required=policy.approval_required,
        plugin={"name": plugin.name, "version": plugin.version, "digest": plugin.digest},
        commands=plugin.commands,
        hooks=HookSet(plugin.hooks, root) if plugin.hooks else None,
        output_schema=plugin.settings.output_schema,
        output_retries=plugin.settings.output_retries,
        a2a_agents=_a2a_agents(plugin, overrides, env),
    )


def _a2a_agents(
    plugin: Plugin, overrides: Mapping[str, Mapping[str, Any]], env: Mapping[str, str] | None
) -> tuple[A2aAgent, ...]:
    """The plugin's A2A agents as the deployment reaches them (its `tools` URL overrides
    the plugin's), checked against the egress list as a remote MCP server is; one without
    a URL, or whose `${VAR}` nothing defines, is left out."""
    agents = []
    for spec in plugin.a2a_agents:
        url = (overrides.get(spec.name) or {}).get("url") or spec.url
        try:
            url = expand_variables(url, env or {})
        except UndefinedVariable:
            continue
        if not url:
            continue
        _check_egress(plugin, "A2A agent", spec.name, url)
        agents.append(A2aAgent(spec.name, url, spec.prefix, spec.description))
    return tuple(agents)


def _check_egress(plugin: Plugin, kind: str, name: str, url: str) -> None:
    host = urlsplit(url).hostname or ""
    if "${" not in url and not plugin.settings.access.allows_host(host):
        raise PluginError(
            f"{kind} {name!r} at {host} is not in the egress list", file="opennua.toml"
        )


@functools.cache
def _builtin() -> Plugin:
    return read_plugin(builtin_plugin_root())


def default_agent(model: str | None = None) -> AgentDefinition:
    """The built-in agent: the built-in plugin (`opennua.plugins.builtin_plugin_root()`)."""
    return agent_from_plugin(builtin_plugin_root(), _builtin(), model=model)


def tool_name(name: str, prefixes: Mapping[str, str] | None = None) -> str:
    """A tool as a plugin names it → as the model sees it (`Read` → `read_file`, a rule
    `Bash(git log:*)` → `shell`,
    `mcp__notes__lookup` → `notes__lookup`; `prefixes`: server name → its tools' prefix,
    for a server whose name is not one, `mcp__google calendar__x` → `google_calendar__x`)."""
    if name.startswith("mcp__"):
        server, sep, tool = name.removeprefix("mcp__").rpartition("__")
        prefix = (prefixes or {}).get(server)
        if sep and prefix is not None:
            return f"{prefix}__{tool}"
        return name.removeprefix("mcp__")
    return CLAUDE_TOOL_NAMES.get(claude_tool(name), name)


def _subagent(
    agent: SubAgent, servers: list[McpServerSpec], model: str, aliases: Mapping[str, str] | None
) -> SubAgentDefinition:
    prefixes = {s.name: s.prefix for s in servers}
    # An alias nothing maps runs the deployment's model (`nua deploy` warned about it).
    own = None if agent.model is None else model_of_alias(agent.model, model, aliases)
    return SubAgentDefinition(
        name=agent.name,
        description=agent.description,
        instructions=agent.instructions.strip(),
        tools=None if agent.tools is None else tuple(tool_name(t, prefixes) for t in agent.tools),
        model=None if own in (None, model) else own,
    )


def _overridden(spec: McpServerSpec, override: Mapping[str, Any] | None) -> McpServerSpec:
    """The server as the deployment says to reach it: a `url` makes it remote, a `command`
    (with its `args`) makes it a stdio server; what the override leaves out stays."""
    if not override:
        return spec
    if override.get("url") is not None:
        # The server keeps its transport: a deployment moves an SSE server, not converts it.
        return dataclasses.replace(spec, url=override["url"], command=None, args=())
    if override.get("command") is not None or override.get("args") is not None:
        return dataclasses.replace(
            spec,
            url=None,
            command=override.get("command") or spec.command,
            args=tuple(override["args"]) if override.get("args") is not None else spec.args,
        )
    return spec


def _server(
    root: Path,
    spec: McpServerSpec,
    plugin: Plugin,
    override: Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
) -> McpServer:
    required = bool(override and override.get("required"))
    if spec.url is not None:
        _check_egress(plugin, "MCP server", spec.name, spec.url)
        # Headers carry credentials: the gateway resolves and injects them (architecture §6);
        # it also expands `${VAR}` in the URL, from the deployment it reads itself.
        return McpServer(
            spec.name,
            url=spec.url,
            prefix=spec.prefix,
            transport="sse" if spec.transport == "sse" else "http",
            required=required,
        )
    # `${PLUGIN_ROOT}` stays in the definition (and its digest); it is expanded when the
    # server starts, to /plugin inside the sandbox, as are the deployment's `${VAR}`s. It
    # has no network: what the deployment's egress list allows goes through the egress
    # proxy (the plugin's own `egress` is a request, docs/gateway.md).
    return McpServer(
        spec.name,
        command=spec.command,
        args=spec.args,
        env=dict(spec.env),
        prefix=spec.prefix,
        plugin_root=root,
        required=required,
        variables=dict(env or {}),
    )


def _task_tool(agents: tuple[SubAgent, ...]) -> Tool:
    task = next(t for t in BUILTIN_TOOLS if t.name == "task")
    if not agents:
        return task
    listing = "\n".join(f"- {a.name}: {a.description}" for a in agents)
    description = (
        f"{task.description} Name one of these sub-agents to start it; any other name starts "
        f"a general-purpose one.\n{listing}"
    )
    return dataclasses.replace(task, description=description)


def _skill_tool(root: Path, skills: tuple[Skill, ...]) -> Tool:
    by_name = {s.name: s for s in skills}
    listing = "\n".join(f"- {s.name}: {s.description}" for s in skills)

    async def skill(name: str, resource: str | None = None) -> str:
        found = by_name.get(name)
        if found is None:
            raise ToolError(f"no skill {name!r}; the skills are: {', '.join(by_name)}")
        if resource is None:
            return _body(found)
        return await asyncio.to_thread(_resource, root, found, resource)

    return make_tool(
        skill,
        name="skill",
        kind="read",
        title="Load skill",
        idempotent=True,
        description=(
            "Load a skill's instructions before you use it, or one of its resources by its "
            f"path (as the instructions name it). The skills:\n{listing}"
        ),
    )


def _body(skill: Skill) -> str:
    if not skill.resources:
        return skill.body
    files = "\n".join(f"- {r}" for r in skill.resources)
    return f"{skill.body.rstrip()}\n\nResources of this skill (load with `resource`):\n{files}"


def _resource(root: Path, skill: Skill, resource: str) -> str:
    rel = posixpath.normpath(resource.replace("\\", "/"))
    if rel not in skill.resources:
        raise ToolError(
            f"{resource!r} is not a resource of skill {skill.name!r}; "
            f"its resources are: {', '.join(skill.resources) or '(none)'}"
        )
    folder = (root / skill.path).resolve()
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder):  # the directory changed since it was read
        raise ToolError(f"{resource!r} leaves the skill's folder")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{resource!r} is not UTF-8 text") from None
