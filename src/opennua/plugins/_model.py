"""What a plugin directory contains, as frozen data (docs/plugins.md, "The plugin format")."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opennua.plugins._commands import Command, find_command
from opennua.plugins._errors import Problem
from opennua.plugins._hooks import Hook
from opennua.plugins._listing import PluginFile


@dataclass(frozen=True)
class Skill:
    """An Agent Skill: `skills/<name>/SKILL.md` and the resources beside it."""

    name: str
    description: str
    body: str
    path: str  # the skill's folder, relative to the plugin root: skills/<name>
    resources: tuple[str, ...] = ()  # relative to the skill's folder, sorted
    allowed_tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubAgent:
    """A sub-agent: `agents/<name>.md`, its body the instructions."""

    name: str
    description: str
    instructions: str
    path: str
    tools: tuple[str, ...] | None = None  # None: the parent's tools
    model: str | None = None  # None or "inherit": the parent's model


#: How a server is reached: a subprocess (stdio), streamable HTTP, or HTTP with SSE.
Transport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True)
class McpServerSpec:
    """One entry of `.mcp.json`: a stdio server (`command`) or a remote one (`url`), as
    written: `${PLUGIN_ROOT}` is expanded by the runtime where the server starts. `name`
    is the key as written (`"google calendar"`); `prefix` is what its tools are named by
    (`google_calendar__list_events`). A remote server with `"url": ""` is a placeholder:
    not `configured` until a deployment supplies its URL."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: Transport = "stdio"
    prefix: str = ""  # "": derived from the name (`tool_prefix`)

    def __post_init__(self) -> None:
        _derive_prefix(self)

    @property
    def configured(self) -> bool:
        """Whether the plugin says where the server is (a command, or a non-empty URL)."""
        return self.command is not None or bool(self.url)


@dataclass(frozen=True)
class A2aAgentSpec:
    """One entry of `.a2a.json`: a remote A2A agent the model may send messages to, as one
    tool (`<prefix>__send_message`). `url` is the agent's JSON-RPC endpoint (its Agent
    Card's `supportedInterfaces[].url`); like a remote MCP server it is reached only
    through the gateway, and `"url": ""` is a placeholder a deployment configures. Its
    name shares one namespace with the `.mcp.json` servers: a deployment's `tools` and
    `credentials` name either."""

    name: str
    url: str
    description: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""  # "": derived from the name (`tool_prefix`)

    def __post_init__(self) -> None:
        _derive_prefix(self)

    @property
    def configured(self) -> bool:
        """Whether the plugin says where the agent is (a non-empty URL)."""
        return bool(self.url)


def _derive_prefix(spec: McpServerSpec | A2aAgentSpec) -> None:
    if not spec.prefix:
        object.__setattr__(spec, "prefix", tool_prefix(spec.name))


def tool_prefix(name: str) -> str:
    """A server name as a tool-name prefix: letters, digits, `-` and single `_` (`__`
    separates server and tool). Each run of anything else becomes one `_`; a name that
    already is one is kept as is, so the tool names of existing plugins do not change."""
    return re.sub(r"[^A-Za-z0-9-]+", "_", name).strip("_") or "server"


@dataclass(frozen=True)
class AccessPolicy:
    """Which tools the model is offered, which always ask a person, which hosts a plugin's
    remote servers may reach. Patterns are shell globs over the names the model sees
    (`read_file`, `docs__search`, `docs__*`)."""

    allowed_tools: tuple[str, ...] | None = None  # None: every tool
    approval_required: tuple[str, ...] = ()
    egress: tuple[str, ...] | None = None  # None: not restricted by the plugin

    def allows(self, tool_name: str) -> bool:
        return self.allowed_tools is None or _matches(tool_name, self.allowed_tools)

    def needs_approval(self, tool_name: str) -> bool:
        return _matches(tool_name, self.approval_required)

    def allows_host(self, host: str) -> bool:
        return self.egress is None or _matches(host.lower(), self.egress)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@dataclass(frozen=True)
class Settings:
    """opennua's own settings, from `opennua.toml` (every key optional)."""

    instructions_file: str = "AGENTS.md"
    instructions: str = ""
    access: AccessPolicy = field(default_factory=AccessPolicy)
    requires_opennua: str | None = None  # a PEP 440 specifier set, e.g. ">=0.1,<1"
    #: The JSON Schema the final answer of a turn must fit (`output-schema`: its file).
    output_schema: Mapping[str, Any] | None = None
    output_schema_file: str | None = None
    output_retries: int = 2  # answers that do not fit, retried before the turn fails


@dataclass(frozen=True)
class Plugin:
    """A plugin directory, read and checked. `digest` covers every byte of `files`."""

    name: str
    version: str
    description: str
    digest: str
    files: tuple[PluginFile, ...]
    skills: tuple[Skill, ...] = ()
    agents: tuple[SubAgent, ...] = ()
    mcp_servers: tuple[McpServerSpec, ...] = ()
    #: Remote A2A agents (`.a2a.json`), each offered to the model as a tool.
    a2a_agents: tuple[A2aAgentSpec, ...] = ()
    settings: Settings = field(default_factory=Settings)
    commands: tuple[Command, ...] = ()  # slash commands: `commands/*.md`
    hooks: tuple[Hook, ...] = ()  # command hooks of the events opennua runs
    manifest: Mapping[str, Any] = field(default_factory=dict)  # plugin.json as written
    #: Warnings and ignored features found while reading (no errors: those refuse it):
    #: what opennua does differently, or does not run (`output-styles/`, …), said
    #: instead of dropped.
    problems: tuple[Problem, ...] = ()

    def connections(self) -> list[dict[str, Any]]:
        """Its MCP servers and A2A agents (transport `a2a`) as the version's answer and
        `nua plugin show` list them: name, tool prefix, transport, configured."""
        rows: list[tuple[str, str, str, bool]]
        rows = [(s.name, s.prefix, s.transport, s.configured) for s in self.mcp_servers]
        rows += [(a.name, a.prefix, "a2a", a.configured) for a in self.a2a_agents]
        keys = ("name", "prefix", "transport", "configured")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def servers_to_configure(self) -> tuple[McpServerSpec, ...]:
        """Remote servers without a URL: a deployment must supply one."""
        return tuple(s for s in self.mcp_servers if not s.configured)

    def skill(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def agent(self, name: str) -> SubAgent | None:
        return next((a for a in self.agents if a.name == name), None)

    def command(self, name: str) -> Command | None:
        """The command `/name` (or `/plugin:name`) runs, if there is one."""
        return find_command(self.commands, self.name, name)
