"""The agent runtime: a durable agent loop on pydantic-ai's model layer
(docs/architecture.md §1, §4).

`agent_from_plugin(root, read_plugin(root))` is the agent a plugin directory defines;
`default_agent()` is the built-in plugin's.

`AgentLoop(agent, journal, env).run(prompt)` runs an execution until it completes, suspends
for a person, or stops; run it again on the same journal (in any process) to resume.

Names load on first use (PEP 562): a process that needs one light part (a model string's
check, the sandbox probe) does not import pydantic-ai, the MCP client and the rest with it
(`nua serve` answers HTTP before it imports what executions need).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opennua import exports_on_demand

if TYPE_CHECKING:
    from opennua.runtime._agent import AgentDefinition, SubAgentDefinition, agent_digest
    from opennua.runtime._client_tools import AGENT_TOOL_NAMES, client_tools
    from opennua.runtime._egress import EGRESS_PATH, EgressRelay
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
        CheckpointWrite,
        Journal,
        LedgerOp,
        StoredCheckpoint,
    )
    from opennua.runtime._loop import AgentLoop
    from opennua.runtime._mcp import GATEWAY_PATH, McpServer
    from opennua.runtime._models import check_model, model_from_env, resolve_model
    from opennua.runtime._plugin import agent_from_plugin, default_agent
    from opennua.runtime._prices import model_priced, usage_cost
    from opennua.runtime._sandbox import (
        SANDBOX_CHOICES,
        Sandbox,
        SandboxLimits,
        SandboxMode,
        choose_sandbox,
        describe_sandbox,
        sandbox_problem,
    )
    from opennua.runtime._slash import UnknownCommand, invoke_command
    from opennua.runtime._tools import ArtifactPort, InputRequired, Tool, ToolContext, tool
    from opennua.runtime._tracing import TraceScope, Tracing, context_of, link_to, pinned_ids

#: Where each public name lives.
_WHERE = {
    "EGRESS_PATH": "_egress",
    "EgressRelay": "_egress",
    "GATEWAY_PATH": "_mcp",
    "SANDBOX_CHOICES": "_sandbox",
    "Sandbox": "_sandbox",
    "SandboxLimits": "_sandbox",
    "choose_sandbox": "_sandbox",
    "describe_sandbox": "_sandbox",
    "AgentDefinition": "_agent",
    "AgentLoop": "_loop",
    "Answer": "_env",
    "ArtifactPort": "_tools",
    "BlobsUnavailable": "_errors",
    "CheckpointWrite": "_journal",
    "Completed": "_env",
    "DerivedIds": "_env",
    "GatewayRoute": "_env",
    "IdSource": "_env",
    "IncompatibleCheckpoint": "_errors",
    "InputRequired": "_tools",
    "Journal": "_journal",
    "LedgerOp": "_journal",
    "Limits": "_env",
    "McpServer": "_mcp",
    "ModelConfigError": "_errors",
    "Outcome": "_env",
    "OwnershipLost": "_errors",
    "RunEnv": "_env",
    "RuntimeEvent": "_events",
    "RuntimeFailure": "_errors",
    "SandboxMode": "_sandbox",
    "Stopped": "_env",
    "StoredCheckpoint": "_journal",
    "SubAgentDefinition": "_agent",
    "Suspended": "_env",
    "Tool": "_tools",
    "ToolContext": "_tools",
    "ToolError": "_errors",
    "TraceScope": "_tracing",
    "Tracing": "_tracing",
    "agent_digest": "_agent",
    "agent_from_plugin": "_plugin",
    "context_of": "_tracing",
    "default_agent": "_plugin",
    "link_to": "_tracing",
    "model_priced": "_prices",
    "pinned_ids": "_tracing",
    "resolve_model": "_models",
    "check_model": "_models",
    "model_from_env": "_models",
    "sandbox_problem": "_sandbox",
    "tool": "_tools",
    "usage_cost": "_prices",
    "UnknownCommand": "_slash",
    "invoke_command": "_slash",
    "AGENT_TOOL_NAMES": "_client_tools",
    "client_tools": "_client_tools",
}

__all__ = [
    "AGENT_TOOL_NAMES",
    "EGRESS_PATH",
    "GATEWAY_PATH",
    "SANDBOX_CHOICES",
    "AgentDefinition",
    "AgentLoop",
    "Answer",
    "ArtifactPort",
    "BlobsUnavailable",
    "CheckpointWrite",
    "Completed",
    "DerivedIds",
    "EgressRelay",
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
    "Sandbox",
    "SandboxLimits",
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
    "UnknownCommand",
    "agent_digest",
    "agent_from_plugin",
    "check_model",
    "choose_sandbox",
    "client_tools",
    "context_of",
    "default_agent",
    "describe_sandbox",
    "invoke_command",
    "link_to",
    "model_from_env",
    "model_priced",
    "pinned_ids",
    "resolve_model",
    "sandbox_problem",
    "tool",
    "usage_cost",
]
assert set(__all__) == set(_WHERE), "every public name needs its module"


__getattr__, __dir__ = exports_on_demand(__name__, _WHERE)
