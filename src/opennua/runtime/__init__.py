"""The agent runtime: a durable agent loop on pydantic-ai's model layer (DESIGN.md §1, §4).

`AgentLoop(agent, journal, env).run(prompt)` runs an execution until it completes, suspends
for a person, or stops; run it again on the same journal (in any process) to resume.
"""

from opennua.runtime._agent import AgentDefinition, agent_digest, default_agent
from opennua.runtime._env import (
    Answer,
    Completed,
    DerivedIds,
    IdSource,
    Limits,
    Outcome,
    RunEnv,
    Stopped,
    Suspended,
)
from opennua.runtime._journal import (
    CheckpointRecord,
    InMemoryJournal,
    Journal,
    LedgerOp,
    SimulatedCrash,
    StoredCheckpoint,
)
from opennua.runtime._loop import AgentLoop
from opennua.runtime._mcp import McpServer
from opennua.runtime._models import resolve_model
from opennua.runtime._scripted import ScriptCall, ScriptedModel, ScriptStep, call, say
from opennua.runtime._tools import ArtifactPort, InputRequired, Tool, ToolContext, tool
from opennua.runtime.errors import (
    Fenced,
    IncompatibleCheckpoint,
    ModelConfigError,
    RuntimeFailure,
    ToolError,
)
from opennua.runtime.events import RuntimeEvent

__all__ = [
    "AgentDefinition",
    "AgentLoop",
    "Answer",
    "ArtifactPort",
    "CheckpointRecord",
    "Completed",
    "DerivedIds",
    "Fenced",
    "IdSource",
    "InMemoryJournal",
    "IncompatibleCheckpoint",
    "InputRequired",
    "Journal",
    "LedgerOp",
    "Limits",
    "McpServer",
    "ModelConfigError",
    "Outcome",
    "RunEnv",
    "RuntimeEvent",
    "RuntimeFailure",
    "ScriptCall",
    "ScriptStep",
    "ScriptedModel",
    "SimulatedCrash",
    "Stopped",
    "StoredCheckpoint",
    "Suspended",
    "Tool",
    "ToolContext",
    "ToolError",
    "agent_digest",
    "call",
    "default_agent",
    "resolve_model",
    "say",
    "tool",
]
