"""What a plugin directory contains, as frozen data (docs/plugins.md, "The plugin format")."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class McpServerSpec:
    """One entry of `.mcp.json`: a stdio server (`command`) or a remote one (`url`), as
    written: `${PLUGIN_ROOT}` is expanded by the runtime where the server starts."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


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
    settings: Settings = field(default_factory=Settings)
    #: Components opennua does not run (`commands/`, `hooks/`, …), reported, not dropped.
    ignored: tuple[str, ...] = ()
    manifest: Mapping[str, Any] = field(default_factory=dict)  # plugin.json as written

    def skill(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def agent(self, name: str) -> SubAgent | None:
        return next((a for a in self.agents if a.name == name), None)
