"""The plugin's own tools: an MCP server over stdio, written with the `mcp` SDK.

opennua starts it with the plugin directory as `${PLUGIN_ROOT}` (see .mcp.json) in the
execution's workspace; the model sees its tools as `notes__remember`, `notes__recall`, ….
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("notes")
NOTES = Path(os.environ.get("NOTES_FILE", "notes.json"))


def _load() -> dict[str, str]:
    return json.loads(NOTES.read_text()) if NOTES.exists() else {}


@server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def remember(key: str, value: str) -> str:
    """Remember `value` under `key`."""
    notes = _load()
    notes[key] = value
    NOTES.write_text(json.dumps(notes))
    return f"remembered {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def recall(key: str) -> str:
    """What was remembered under `key`."""
    return _load().get(key, f"nothing remembered under {key}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def forget(key: str) -> str:
    """Forget `key` (read-only by its hint, yet opennua.toml makes it ask every time)."""
    notes = _load()
    notes.pop(key, None)
    NOTES.write_text(json.dumps(notes))
    return f"forgot {key}"


if __name__ == "__main__":
    server.run("stdio")
