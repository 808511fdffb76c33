"""Agent definitions and their digest: what an execution pins and its checkpoints are
checked against."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from opennua.runtime._a2a import A2aAgent
from opennua.runtime._mcp import McpServer
from opennua.runtime._tools import Tool

if TYPE_CHECKING:
    from opennua.plugins import Command
    from opennua.runtime._hooks import HookSet

DEFINITION_FORMAT = 1
#: Built-in tools added after definitions were first digested (`equivalent_digests`).
ADDED_BUILTINS = frozenset({"glob", "grep", "web_fetch"})

DEFAULT_WORKER_INSTRUCTIONS = """You are a sub-agent working on one task for another agent.
Keep your own plan with `plan`, use the tools you need, and finish with a concise answer."""


@dataclass(frozen=True)
class SubAgentDefinition:
    """A named sub-agent the `task` tool can start: its own instructions, and optionally
    its own tools (names or globs over the parent's) and model."""

    name: str
    description: str
    instructions: str
    tools: tuple[str, ...] | None = None  # None: every tool the parent has
    model: str | None = None  # None: the parent's model

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "instructions": self.instructions,
            "tools": None if self.tools is None else list(self.tools),
            "model": self.model,
        }


@dataclass(frozen=True)
class AgentDefinition:
    """What runs: instructions, tools, MCP servers, the model string, named sub-agents and
    the access policy (tool names or globs, applied to every tool, MCP ones included)."""

    name: str
    instructions: str
    model: str
    tools: tuple[Tool, ...]
    worker_instructions: str = DEFAULT_WORKER_INSTRUCTIONS
    mcp_servers: tuple[McpServer, ...] = field(default=())
    max_depth: int = 1  # sub-agents may not spawn sub-agents below this depth
    subagents: tuple[SubAgentDefinition, ...] = ()
    allowed_tools: tuple[str, ...] | None = None  # None: every tool is offered
    approval_required: tuple[str, ...] = ()  # asked every time, whatever the tool says
    #: The plugin this definition was built from: {name, version, digest}.
    plugin: dict[str, str] | None = None
    #: The plugin's slash commands (`invoke_command` expands one into the prompt).
    commands: tuple[Command, ...] = ()
    #: The plugin's command hooks (None: none).
    hooks: HookSet | None = None
    #: The JSON Schema the root run's final answer must fit (None: any answer), and how
    #: many answers that do not fit are sent back to the model before the turn fails.
    output_schema: Mapping[str, Any] | None = None
    output_retries: int = 2
    #: Remote A2A agents, one tool each (`<prefix>__send_message`), reached through the
    #: gateway.
    a2a_agents: tuple[A2aAgent, ...] = ()

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "format": DEFINITION_FORMAT,
            "name": self.name,
            "instructions": self.instructions,
            "worker_instructions": self.worker_instructions,
            "model": self.model,
            "tools": sorted((t.describe() for t in self.tools), key=lambda d: d["name"]),
            "mcp_servers": [s.describe() for s in self.mcp_servers],
            "max_depth": self.max_depth,
        }
        # Only when set, so that a definition without them keeps the digest it had.
        if self.subagents:
            described["subagents"] = [a.describe() for a in self.subagents]
        if self.allowed_tools is not None:
            described["allowed_tools"] = list(self.allowed_tools)
        if self.approval_required:
            described["approval_required"] = list(self.approval_required)
        if self.plugin is not None:
            described["plugin"] = dict(self.plugin)
        if self.commands:
            described["commands"] = [c.path for c in self.commands]
        if self.hooks is not None:
            described["hooks"] = self.hooks.describe()
        if self.output_schema is not None:
            described["output_schema"] = dict(self.output_schema)
            described["output_retries"] = self.output_retries
        if self.a2a_agents:
            described["a2a_agents"] = [a.describe() for a in self.a2a_agents]
        return described

    # Cached: a definition is immutable and reused across the attempts of an execution
    # (the supervisor caches it per snapshot digest); hashing its description with every
    # tool's schema was ~4 % of a busy server's CPU, paid at every attempt.
    @functools.cached_property
    def digest(self) -> str:
        return agent_digest(self)

    @functools.cached_property
    def equivalent_digests(self) -> frozenset[str]:
        """Digests a checkpoint may carry and still be this agent: its own, and the one it
        had before it named the plugin it was built from. Checkpoints written before
        plugins existed (the built-in agent, same instructions and tools) resume after an
        upgrade; the plugin reference adds provenance, not behaviour."""
        digests = {self.digest}
        # Nor do the read-only built-ins added since (glob, grep, web_fetch): a checkpoint
        # from before them resumes, with them offered.
        older = tuple(t for t in self.tools if t.name not in ADDED_BUILTINS)
        for variant in (self, replace(self, tools=older)):
            digests.add(agent_digest(variant))
            if self.plugin is not None:
                digests.add(agent_digest(replace(variant, plugin=None)))
        return frozenset(digests)

    def subagent(self, name: str) -> SubAgentDefinition | None:
        return next((a for a in self.subagents if a.name == name), None)

    def offered(
        self, tools: Mapping[str, Tool], subagent: str | None, depth: int
    ) -> dict[str, Tool]:
        """The tools a run sees: a named sub-agent's own list (of the parent's), no `task`
        below `max_depth`, and the client's tools in the root run only (the client asked
        for them in its turn; a sub-agent's calls are not shown to it as its own)."""
        out = {
            n: t
            for n, t in tools.items()
            if not (n == "task" and depth >= self.max_depth) and not (t.client and depth > 0)
        }
        sub = self.subagent(subagent) if subagent is not None else None
        if sub is not None and sub.tools is not None:
            out = {n: t for n, t in out.items() if matches(n, sub.tools)}
        return out

    def governed(self, tools: Iterable[Tool]) -> dict[str, Tool]:
        """`tools` under the access policy: one outside the allow-list is dropped (never
        offered, never callable); one that always needs approval asks."""
        out = {}
        for t in tools:
            if self.allowed_tools is not None and not matches(t.name, self.allowed_tools):
                continue
            if matches(t.name, self.approval_required) and not t.requires_approval:
                t = replace(t, requires_approval=True)
            out[t.name] = t
        return out


def matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def agent_digest(definition: AgentDefinition) -> str:
    """sha256 over the canonical JSON description of the definition and its model."""
    canonical = json.dumps(definition.describe(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
