"""The plugin format (docs/plugins.md): a directory in the layout agent developers already
use — Agent Skills, sub-agents, `.mcp.json`, the Claude Code manifest — plus `opennua.toml`.

`read_plugin(path)` checks a directory and returns a `Plugin` with its canonical digest and
its warnings (`Plugin.problems`); a plugin with errors is a `PluginError` carrying every
problem found, each naming its file and line. The runtime never imports a
plugin's code: its code runs as MCP servers.
"""

from opennua.plugins._aliases import (
    DEFAULT_ALIASES,
    model_of_alias,
    unmapped_aliases,
)
from opennua.plugins._commands import (
    Command,
    find_command,
    parse_invocation,
    unknown_command,
)
from opennua.plugins._errors import PluginError, Problem, Severity
from opennua.plugins._hooks import HOOK_EVENTS, Hook, HookEvent
from opennua.plugins._listing import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    PluginFile,
    never_published,
)
from opennua.plugins._marketplace import MARKETPLACE, MarketplaceEntry, read_marketplace
from opennua.plugins._model import (
    A2aAgentSpec,
    AccessPolicy,
    McpServerSpec,
    Plugin,
    Settings,
    Skill,
    SubAgent,
    Transport,
    tool_prefix,
)
from opennua.plugins._read import MANIFEST, read_plugin
from opennua.plugins._scaffold import builtin_plugin_root, scaffold_plugin
from opennua.plugins._tools import CLAUDE_TOOL_NAMES, claude_tool, unsupported_tool
from opennua.plugins._variables import UndefinedVariable, expand_variables, undefined_variables

__all__ = [
    "CLAUDE_TOOL_NAMES",
    "DEFAULT_ALIASES",
    "HOOK_EVENTS",
    "MANIFEST",
    "MARKETPLACE",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "A2aAgentSpec",
    "AccessPolicy",
    "Command",
    "Hook",
    "HookEvent",
    "MarketplaceEntry",
    "McpServerSpec",
    "Plugin",
    "PluginError",
    "PluginFile",
    "Problem",
    "Settings",
    "Severity",
    "Skill",
    "SubAgent",
    "Transport",
    "UndefinedVariable",
    "builtin_plugin_root",
    "claude_tool",
    "expand_variables",
    "find_command",
    "model_of_alias",
    "never_published",
    "parse_invocation",
    "read_marketplace",
    "read_plugin",
    "scaffold_plugin",
    "tool_prefix",
    "undefined_variables",
    "unknown_command",
    "unmapped_aliases",
    "unsupported_tool",
]
