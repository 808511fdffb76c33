"""`/name args` as a turn's message: the plugin's command expanded into the model's prompt.

The session keeps the message as the user wrote it (`/review-pr 123`); the model gets the
command's body with the arguments in it (docs/decisions.md, "Slash commands"). The
command's `allowed-tools` narrows the turn's tools; its `model`, when it is a
`provider:model` string, is the turn's model.
"""

from __future__ import annotations

import dataclasses
import re

from opennua.plugins import find_command, parse_invocation, unknown_command
from opennua.runtime._agent import AgentDefinition, matches
from opennua.runtime._errors import RuntimeFailure
from opennua.runtime._plugin import tool_name

#: `Bash(git status:*)`: the tool, without Claude Code's per-argument pattern.
_PATTERN = re.compile(r"\(.*\)$")


class UnknownCommand(RuntimeFailure):
    """A message names a command the agent does not have."""

    code = "unknown_command"


def invoke_command(agent: AgentDefinition, text: str) -> tuple[AgentDefinition, str]:
    """The agent and prompt for `text`: unchanged for a plain message; for `/name args`,
    the command's expansion and the agent narrowed to its tools and model. `//text` is
    the text `/text`. Raises `UnknownCommand`."""
    if text.startswith("//"):
        return agent, text[1:]
    invoked = parse_invocation(text)
    if invoked is None:
        return agent, text
    name, arguments = invoked
    plugin = (agent.plugin or {}).get("name", agent.name)
    command = find_command(agent.commands, plugin, name)
    if command is None:
        raise UnknownCommand(unknown_command(name, agent.commands))
    changes: dict[str, object] = {}
    if command.allowed_tools is not None:
        wanted = dict.fromkeys(tool_name(_PATTERN.sub("", t)) for t in command.allowed_tools)
        policy = agent.allowed_tools
        changes["allowed_tools"] = tuple(t for t in wanted if policy is None or matches(t, policy))
    if command.model is not None and ":" in command.model:
        changes["model"] = command.model
    return dataclasses.replace(agent, **changes), command.expand(arguments)  # type: ignore[arg-type]
