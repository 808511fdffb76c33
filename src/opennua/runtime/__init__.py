"""The agent runtime: a durable agent loop on pydantic-ai's model layer
(docs/architecture.md §1, §4).

`agent_from_plugin(root, read_plugin(root))` is the agent a plugin directory defines;
`default_agent()` is the built-in plugin's.

`AgentLoop(agent, journal, env).run(prompt)` runs an execution until it completes, suspends
for a person, or stops; run it again on the same journal (in any process) to resume.
"""

from opennua.runtime._agent import AgentDefinition, SubAgentDefinition, agent_digest
from opennua.runtime._budget import usage_cost
from opennua.runtime._env import (
    Answer,
    Completed,
    DerivedIds,
    GatewayRoute,
    IdSource,
    Limits,
    Outcome,
    RunEnv,
    Stopped,
    Suspended,
)
from opennua.runtime._errors import (
    BlobsUnavailable,
    IncompatibleCheckpoint,
    ModelConfigError,
    OwnershipLost,
    RuntimeFailure,
    ToolError,
)
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._journal import (
    CheckpointRecord,
    Journal,
    LedgerOp,
    StoredCheckpoint,
)
from opennua.runtime._loop import AgentLoop
from opennua.runtime._mcp import GATEWAY_PATH, McpServer
from opennua.runtime._models import resolve_model
from opennua.runtime._plugin import agent_from_plugin, default_agent
from opennua.runtime._sandbox import SandboxMode, sandbox_problem
from opennua.runtime._tools import ArtifactPort, InputRequired, Tool, ToolContext, tool
from opennua.runtime._tracing import TraceScope, Tracing, context_of, link_to, pinned_ids

__all__ = [
    "GATEWAY_PATH",
    "AgentDefinition",
    "AgentLoop",
    "Answer",
    "ArtifactPort",
    "BlobsUnavailable",
    "CheckpointRecord",
    "Completed",
    "DerivedIds",
    "GatewayRoute",
    "IdSource",
    "IncompatibleCheckpoint",
    "InputRequired",
    "Journal",
    "LedgerOp",
    "Limits",
    "McpServer",
    "ModelConfigError",
    "Outcome",
    "OwnershipLost",
    "RunEnv",
    "RuntimeEvent",
    "RuntimeFailure",
    "SandboxMode",
    "Stopped",
    "StoredCheckpoint",
    "SubAgentDefinition",
    "Suspended",
    "Tool",
    "ToolContext",
    "ToolError",
    "TraceScope",
    "Tracing",
    "agent_digest",
    "agent_from_plugin",
    "context_of",
    "default_agent",
    "link_to",
    "pinned_ids",
    "resolve_model",
    "sandbox_problem",
    "tool",
    "usage_cost",
]
