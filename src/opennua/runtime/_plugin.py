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
    McpServerSpec,
    Plugin,
    PluginError,
    Skill,
    SubAgent,
    builtin_plugin_root,
    read_plugin,
)
from opennua.runtime._agent import AgentDefinition, SubAgentDefinition
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._errors import ToolError
from opennua.runtime._mcp import McpServer
from opennua.runtime._models import model_from_env
from opennua.runtime._tools import Tool, make_tool

#: Claude Code's tool names, as sub-agents and skills written for it name them.
CLAUDE_TOOL_NAMES = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Bash": "shell",
    "Glob": "list_files",
    "LS": "list_files",
    "TodoWrite": "plan",
    "Task": "task",
    "Skill": "skill",
}


def agent_from_plugin(
    root: Path | str,
    plugin: Plugin,
    *,
    model: str | None = None,
    tool_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> AgentDefinition:
    """The agent `plugin` (read from `root`) defines; `model` defaults to `NUA_MODEL` or
    `scripted:demo`. `tool_overrides` is a deployment's `tools`: per `.mcp.json` server
    name, a `url`, or a `command` and `args`, that replace how that server is reached.
    Raises `PluginError` for a remote MCP server the egress list refuses."""
    root = Path(root).resolve()
    servers = [
        _overridden(spec, (tool_overrides or {}).get(spec.name)) for spec in plugin.mcp_servers
    ]
    tools = [_task_tool(plugin.agents) if t.name == "task" else t for t in BUILTIN_TOOLS]
    if plugin.skills:
        tools.append(_skill_tool(root, plugin.skills))
    policy = plugin.settings.access
    return AgentDefinition(
        name=plugin.name,
        instructions=plugin.settings.instructions.strip()
        or f"You are {plugin.name}. {plugin.description}".strip(),
        model=model or model_from_env(),
        tools=tuple(tools),
        mcp_servers=tuple(_server(root, spec, plugin) for spec in servers),
        subagents=tuple(_subagent(a) for a in plugin.agents),
        allowed_tools=policy.allowed_tools,
        approval_required=policy.approval_required,
        plugin={"name": plugin.name, "version": plugin.version, "digest": plugin.digest},
    )


@functools.cache
def _builtin() -> Plugin:
    return read_plugin(builtin_plugin_root())


def default_agent(model: str | None = None) -> AgentDefinition:
    """The built-in agent: the built-in plugin (`opennua.plugins.builtin_plugin_root()`)."""
    return agent_from_plugin(builtin_plugin_root(), _builtin(), model=model)


def tool_name(name: str) -> str:
    """A tool as a plugin names it → as the model sees it (`Read` → `read_file`,
    `mcp__notes__lookup` → `notes__lookup`)."""
    if name.startswith("mcp__"):
        return name.removeprefix("mcp__")
    return CLAUDE_TOOL_NAMES.get(name, name)


def _subagent(agent: SubAgent) -> SubAgentDefinition:
    return SubAgentDefinition(
        name=agent.name,
        description=agent.description,
        instructions=agent.instructions.strip(),
        tools=None if agent.tools is None else tuple(tool_name(t) for t in agent.tools),
        model=agent.model,
    )


def _overridden(spec: McpServerSpec, override: Mapping[str, Any] | None) -> McpServerSpec:
    """The server as the deployment says to reach it: a `url` makes it remote, a `command`
    (with its `args`) makes it a stdio server; what the override leaves out stays."""
    if not override:
        return spec
    if override.get("url") is not None:
        return dataclasses.replace(spec, url=override["url"], command=None, args=())
    if override.get("command") is not None or override.get("args") is not None:
        return dataclasses.replace(
            spec,
            url=None,
            command=override.get("command") or spec.command,
            args=tuple(override["args"]) if override.get("args") is not None else spec.args,
        )
    return spec


def _server(root: Path, spec: McpServerSpec, plugin: Plugin) -> McpServer:
    egress = plugin.settings.access.egress
    if spec.url is not None:
        host = urlsplit(spec.url).hostname or ""
        if not plugin.settings.access.allows_host(host):
            raise PluginError(
                f"MCP server {spec.name!r} at {host} is not in the egress list",
                file="opennua.toml",
            )
        # Headers carry credentials: the gateway resolves and injects them (architecture §6).
        return McpServer(spec.name, url=spec.url, prefix=True)
    # `${PLUGIN_ROOT}` stays in the definition (and its digest); it is expanded when the
    # server starts, to /plugin inside the sandbox. Bubblewrap cannot filter by host, so a
    # confined server has the network unless the plugin's egress list is empty.
    return McpServer(
        spec.name,
        command=spec.command,
        args=spec.args,
        env=dict(spec.env),
        prefix=True,
        plugin_root=root,
        network=egress is None or bool(egress),
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
