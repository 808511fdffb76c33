"""The plugin format (docs/plugins.md): a directory in the layout agent developers already
use — Agent Skills, sub-agents, `.mcp.json`, the Claude Code manifest — plus `opennua.toml`.

`read_plugin(path)` checks a directory and returns a `Plugin` with its canonical digest;
every bad input is a `PluginError` naming the file and line. The runtime never imports a
plugin's code: its code runs as MCP servers.
"""

from opennua.plugins._errors import PluginError
from opennua.plugins._listing import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES, PluginFile
from opennua.plugins._model import (
    AccessPolicy,
    McpServerSpec,
    Plugin,
    Settings,
    Skill,
    SubAgent,
)
from opennua.plugins._read import read_plugin
from opennua.plugins._scaffold import builtin_plugin_root, scaffold_plugin

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "AccessPolicy",
    "McpServerSpec",
    "Plugin",
    "PluginError",
    "PluginFile",
    "Settings",
    "Skill",
    "SubAgent",
    "builtin_plugin_root",
    "read_plugin",
    "scaffold_plugin",
]
