"""`builtin_plugin_root()` and `scaffold_plugin()`: the two plugin directories shipped in
the package (the built-in agent, and the template of `nua plugin init`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from opennua.plugins._errors import PluginError
from opennua.plugins._model import Plugin
from opennua.plugins._read import NAME, read_plugin

_HERE = Path(__file__).parent
_SCAFFOLD = _HERE / "scaffold"
#: Text files of the template that name the plugin.
_NAMED = (".claude-plugin/plugin.json", "AGENTS.md")


def builtin_plugin_root() -> Path:
    """The built-in agent as a plugin directory: what the `default` deployment runs."""
    return _HERE / "builtin"


def scaffold_plugin(dest: Path | str, name: str) -> Plugin:
    """Write a working plugin named `name` into `dest` (which must not exist or be empty):
    instructions, one skill with a resource, one sub-agent and one stdio MCP server."""
    dest = Path(dest)
    if NAME.fullmatch(name) is None:
        raise PluginError(f"name {name!r} must be lowercase letters, digits and hyphens")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise PluginError(f"{dest} exists and is not an empty directory")
    shutil.copytree(
        _SCAFFOLD, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    for rel in _NAMED:
        path = dest / rel
        path.write_text(
            path.read_text(encoding="utf-8").replace("{{name}}", name), encoding="utf-8"
        )
    (dest / "servers" / "notes.py").chmod(0o755)
    return read_plugin(dest)
