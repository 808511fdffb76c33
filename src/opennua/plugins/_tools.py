"""Claude Code's tool names, as sub-agents (`tools`) and skills (`allowed-tools`) written for
it name them, and the opennua tool each one is. A Claude Code name outside this mapping is
reported when the plugin is read (the sub-agent runs without it), never dropped silently."""

from __future__ import annotations

import re

CLAUDE_TOOL_NAMES = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Bash": "shell",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "list_files",
    "WebFetch": "web_fetch",
    "TodoWrite": "plan",
    "Task": "task",
    "Skill": "skill",
}

#: How Claude Code spells its own tools (and permission rules such as `Bash(git:*)`);
#: opennua's own names are snake_case and MCP tools `server__tool` or `mcp__server__tool`.
_CLAUDE_STYLE = re.compile(r"[A-Z][A-Za-z]*(?:\(.*\))?")


def claude_tool(name: str) -> str:
    """The tool a Claude Code permission rule names (`Bash(git log:*)` → `Bash`): opennua
    has no per-argument rule, so a rule stands for its whole tool."""
    return name.partition("(")[0].strip() if _CLAUDE_STYLE.fullmatch(name.strip()) else name


def unsupported_tool(name: str) -> bool:
    """Whether `name` is a Claude Code tool (or permission rule) opennua does not have."""
    return _CLAUDE_STYLE.fullmatch(name.strip()) is not None and (
        claude_tool(name) not in CLAUDE_TOOL_NAMES
    )
