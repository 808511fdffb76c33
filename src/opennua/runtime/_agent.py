"""Agent definitions and their digest: what an execution pins and its checkpoints are
checked against."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._mcp import McpServer
from opennua.runtime._models import model_from_env
from opennua.runtime._tools import Tool

DEFINITION_FORMAT = 1

DEFAULT_INSTRUCTIONS = """You are opennua's default agent. You work in a workspace directory.
Keep a plan with the `plan` tool and update it as you go. Use the file tools for files and
`shell` for commands (the user approves each). Delegate self-contained work to a sub-agent
with `task`. Publish deliverables with `publish_artifact`. Ask with `ask_user` only when you
cannot proceed. Finish with a short answer."""

DEFAULT_WORKER_INSTRUCTIONS = """You are a sub-agent working on one task for another agent.
Keep your own plan with `plan`, use the tools you need, and finish with a concise answer."""


@dataclass(frozen=True)
class AgentDefinition:
    """What runs: instructions, tools, MCP servers and the model string."""

    name: str
    instructions: str
    model: str
    tools: tuple[Tool, ...]
    worker_instructions: str = DEFAULT_WORKER_INSTRUCTIONS
    mcp_servers: tuple[McpServer, ...] = field(default=())
    max_depth: int = 1  # sub-agents may not spawn sub-agents below this depth

    def describe(self) -> dict[str, Any]:
        return {
            "format": DEFINITION_FORMAT,
            "name": self.name,
            "instructions": self.instructions,
            "worker_instructions": self.worker_instructions,
            "model": self.model,
            "tools": sorted((t.describe() for t in self.tools), key=lambda d: d["name"]),
            "mcp_servers": [s.describe() for s in self.mcp_servers],
            "max_depth": self.max_depth,
        }

    @property
    def digest(self) -> str:
        return agent_digest(self)


def agent_digest(definition: AgentDefinition) -> str:
    """sha256 over the canonical JSON description of the definition and its model."""
    canonical = json.dumps(definition.describe(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def default_agent(model: str | None = None) -> AgentDefinition:
    """The built-in agent sessions run until plugins exist; `model` defaults to `NUA_MODEL`
    or `scripted:demo`."""
    return AgentDefinition(
        name="default",
        instructions=DEFAULT_INSTRUCTIONS,
        model=model or model_from_env(),
        tools=BUILTIN_TOOLS,
    )
