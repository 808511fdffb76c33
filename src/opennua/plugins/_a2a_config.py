"""`.a2a.json`: the remote A2A agents a plugin's model may call, one tool each
(docs/plugins.md, "A2A agents"). Shaped like `.mcp.json`'s remote servers, and checked
by the same rules: `{"agents": {name: {"url": ..., "description": ..., "headers": ...}}}`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opennua.plugins._errors import PluginError
from opennua.plugins._files import read_json
from opennua.plugins._mcp_config import check_entry, check_remote_url, check_string_map
from opennua.plugins._model import A2aAgentSpec, McpServerSpec
from opennua.plugins._report import Report

A2A_CONFIG = ".a2a.json"
_KEYS = frozenset({"url", "description", "headers"})


def read_a2a_agents(
    root: Path, paths: set[str], servers: tuple[McpServerSpec, ...], report: Report
) -> tuple[A2aAgentSpec, ...]:
    if A2A_CONFIG not in paths:
        return ()
    with report.checking():
        data, text = read_json(root, A2A_CONFIG)
        agents = data.get("agents") if isinstance(data, dict) else None
        if not isinstance(agents, dict):
            raise PluginError('expected {"agents": {name: {...}}}', file=A2A_CONFIG, line=1)
        specs: list[A2aAgentSpec] = []
        for name, entry in agents.items():
            with report.checking():
                specs.append(_agent(name, entry, text, servers, specs, report))
        return tuple(specs)
    return ()


def _agent(
    name: str,
    entry: Any,
    text: str,
    servers: tuple[McpServerSpec, ...],
    earlier: list[A2aAgentSpec],
    report: Report,
) -> A2aAgentSpec:
    entry, line, bad = check_entry("agent", name, entry, text, A2A_CONFIG)
    if "url" not in entry:
        raise bad('needs a url (its JSON-RPC endpoint; "" for a deployment to give)')
    url, description = entry["url"], entry.get("description", "")
    check_remote_url(url, bad)
    check_string_map("headers", entry.get("headers", {}), bad)
    if not isinstance(description, str):
        raise bad("description must be a string")
    for key in sorted(set(entry) - _KEYS):
        report.add("ignored", f"agent {name!r}: key {key!r} is not read", A2A_CONFIG, line)
    spec = A2aAgentSpec(
        name=name, url=url, description=description, headers=entry.get("headers", {})
    )
    # One namespace with the MCP servers: a deployment's `tools` and `credentials` name
    # either, and the model sees both as `<prefix>__<tool>`.
    if any(s.name == name for s in servers):
        raise bad(f"{name!r} is also an MCP server in .mcp.json; names are shared")
    taken = {s.prefix for s in servers} | {a.prefix for a in earlier}
    if spec.prefix in taken:
        raise bad(f"its tool prefix {spec.prefix!r} is another server's or agent's")
    if not spec.configured:
        report.add(
            "warning",
            f"agent {name!r} has no URL; a deployment must supply one (until then the agent "
            "runs without it)",
            A2A_CONFIG,
            line,
        )
    return spec
