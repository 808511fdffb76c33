"""How the plugin commands print a plugin's problems and servers (docs/cli.md): one
problem per line, `LOCATION: SEVERITY: MESSAGE`, and a summary of the counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opennua.plugins import Problem

from ._context import Settings


def problems_doc(problems: Iterable[Problem]) -> list[dict[str, Any]]:
    return [
        {"severity": p.severity, "message": p.message, "file": p.file, "line": p.line}
        for p in problems
    ]


def summary(problems: Iterable[Problem | dict[str, Any]]) -> str:
    """`2 errors, 1 warning, 3 ignored` (the severities there are)."""
    counts = Counter(p.severity if isinstance(p, Problem) else p["severity"] for p in problems)
    shown = [
        f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'ignored' else ''}"
        for s in ("error", "warning", "ignored")
        if counts[s]
    ]
    return ", ".join(shown) or "no problems"


def print_contents(
    cfg: Settings, problems: Sequence[Mapping[str, Any]], servers: Sequence[Mapping[str, Any]]
) -> None:
    """Each server whose tools are named other than it (the prefix the model sees), then
    the plugin's problems (a server without a URL is one of them: a warning)."""
    for server in servers:
        if server["prefix"] != server["name"]:
            cfg.stdout.print(
                f"server {server['name']!r}: tools named {server['prefix']}__*", soft_wrap=True
            )
    for p in problems:
        problem = Problem(p["severity"], p["message"], p["file"], p["line"])
        cfg.stdout.print(str(problem), soft_wrap=True)


def short(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]
