"""Client tools: tools the client defines and runs itself (AG-UI frontend tools).

The model is offered them beside the agent's own, in the root run only. A call parks the
execution the way `ask_user` does, through the one waiting mechanism there is: the call
raises `InputRequired`, which opens an input request (`input_required`, naming the call)
and suspends; the answer's payload, the client's result, is what the call returns when
the resumed attempt runs it again. Nothing runs here: a re-run only parks again, so the
call is idempotent and a crash never asks whether to run it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import JsonValue

from opennua.runtime._tools import InputRequired, Tool, ToolContext

#: The names the runtime's own tools take (the built-ins and a plugin's `skill`): a client
#: tool may not take one (the Host refuses it; a plugin's MCP tool fails the turn instead).
#: Written out, not read from `BUILTIN_TOOLS`, so the Host side need not import the tools
#: (a test keeps the two the same).
AGENT_TOOL_NAMES = frozenset(
    {
        "plan",
        "task",
        "ask_user",
        "publish_artifact",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "glob",
        "grep",
        "web_fetch",
        "shell",
        "skill",
    }
)
#: What an empty parameters schema (`{}`, no arguments) is offered to models as.
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def client_prompt(name: str) -> str:
    """The prompt of the input request a call of client tool `name` opens."""
    return f"Run the client tool `{name}` and answer with its result"


def client_tool(spec: Mapping[str, Any]) -> Tool:
    """A `Tool` for one client tool (`{name, description, parameters}`, as the turn holds
    it). Its arguments are the client's to check: it defined their schema."""
    name = str(spec["name"])

    def run(ctx: ToolContext, **_args: Any) -> JsonValue:
        if ctx.answer is None:
            raise InputRequired(client_prompt(name))
        return ctx.answer

    return Tool(
        name=name,
        description=str(spec.get("description") or ""),
        kind="other",
        title=name,
        requires_approval=False,
        idempotent=True,
        fn=run,
        args_model=None,
        takes_context=True,
        json_schema=dict(spec.get("parameters") or _NO_ARGUMENTS),
        client=True,
    )


def client_tools(specs: Iterable[Mapping[str, Any]] | None) -> tuple[Tool, ...]:
    return tuple(client_tool(spec) for spec in specs or ())
