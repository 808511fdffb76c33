"""`.mcp.json`: the plugin's MCP servers, as editors and agent tools write the file — with
or without its `mcpServers` wrapper, names as written (each with a safe tool prefix), a
placeholder `"url": ""` as a server a deployment must configure (docs/plugins.md)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opennua.plugins._errors import PluginError
from opennua.plugins._files import json_line, read_json
from opennua.plugins._model import McpServerSpec, Transport, tool_prefix
from opennua.plugins._report import Report

MCP_CONFIG = ".mcp.json"
MCP_TRANSPORTS: tuple[Transport, ...] = ("stdio", "http", "sse")


def read_mcp_servers(root: Path, paths: set[str], report: Report) -> tuple[McpServerSpec, ...]:
    if MCP_CONFIG not in paths:
        return ()
    with report.checking():
        data, text = read_json(root, MCP_CONFIG)
        if not isinstance(data, dict):
            raise PluginError("expected an object of servers by name", file=MCP_CONFIG, line=1)
        # Both forms are in use: {"mcpServers": {name: {...}}} and {name: {...}}.
        servers = data.get("mcpServers", data)
        if not isinstance(servers, dict):
            raise PluginError('"mcpServers" must be an object', file=MCP_CONFIG, line=1)
        specs: list[McpServerSpec] = []
        for name, entry in servers.items():
            with report.checking():
                specs.append(_mcp_server(name, entry, text, report))
        return _distinct_prefixes(specs)
    return ()


def _distinct_prefixes(specs: list[McpServerSpec]) -> tuple[McpServerSpec, ...]:
    """A name that already is a prefix keeps it; a derived one that collides with another
    server's gets `_2`, `_3`… ("google calendar" beside "google_calendar")."""
    taken = {s.prefix for s in specs if s.prefix == s.name}
    out = []
    for spec in specs:
        if spec.prefix != spec.name:
            prefix, n = spec.prefix, 1
            while prefix in taken:
                n += 1
                prefix = f"{spec.prefix}_{n}"
            taken.add(prefix)
            spec = dataclasses.replace(spec, prefix=prefix)
        out.append(spec)
    return tuple(out)


def check_remote_url(url: Any, bad: Callable[[str], PluginError]) -> None:
    """A remote connection's URL: http(s), a `${VAR}` the deployment supplies, or "" (a
    placeholder the deployment fills in)."""
    if not (isinstance(url, str) and re.match(r"$|https?://|\$\{", url)):
        raise bad("url must be an http(s) URL")


def check_string_map(label: str, table: Any, bad: Callable[[str], PluginError]) -> None:
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise bad(f"{label} must map names to strings")


def check_entry(
    what: str, name: str, entry: Any, text: str, file: str
) -> tuple[dict[str, Any], int | None, Callable[[str], PluginError]]:
    """One named entry of a plugin's JSON config (a server, an agent): the entry, its
    line, and how to say what is wrong with it. It must have a name and be an object."""
    line = json_line(text, name)

    def bad(message: str) -> PluginError:
        return PluginError(f"{what} {name!r}: {message}", file=file, line=line)

    if not name.strip():
        raise bad(f"a {what} needs a name")
    if not isinstance(entry, dict):
        raise bad("must be an object")
    return entry, line, bad


def _mcp_server(name: str, entry: Any, text: str, report: Report) -> McpServerSpec:
    entry, line, bad = check_entry("server", name, entry, text, MCP_CONFIG)
    kind = entry.get("type")
    if kind is not None and kind not in MCP_TRANSPORTS:
        raise bad(f"type {kind!r} is not one of {', '.join(MCP_TRANSPORTS)}")
    command, url = entry.get("command"), entry.get("url")
    if kind == "stdio" and command is None:
        raise bad("a stdio server needs a command")
    if kind in ("http", "sse") and url is None:
        raise bad(f"an {kind} server needs a url")
    if (command is None) == (url is None):
        raise bad("needs exactly one of command (stdio) or url (HTTP)")
    args, env, headers = entry.get("args", []), entry.get("env", {}), entry.get("headers", {})
    if command is not None and not isinstance(command, str):
        raise bad("command must be a string")
    if url is not None:
        check_remote_url(url, bad)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise bad("args must be a list of strings")
    for label, table in (("env", env), ("headers", headers)):
        check_string_map(label, table, bad)
    transport: Transport = kind or ("stdio" if command is not None else "http")
    spec = McpServerSpec(
        name=name,
        command=command,
        args=tuple(args),
        env=env,
        url=url,
        headers=headers,
        transport=transport,
        prefix=tool_prefix(name),
    )
    if not spec.configured:
        report.add(
            "warning",
            f"server {name!r} has no URL; a deployment must supply one (until then the agent "
            "runs without it)",
            MCP_CONFIG,
            line,
        )
    return spec
