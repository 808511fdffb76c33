"""Hooks: `hooks/hooks.json` (Claude Code's format) as frozen data.

`{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command":
"${CLAUDE_PLUGIN_ROOT}/check.sh", "timeout": 30}]}], …}}`. opennua runs command hooks of
the events in `HOOK_EVENTS` (runtime/_hooks.py); every other event or type is reported as
ignored, never dropped silently (docs/plugins.md, "Hooks").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from opennua.plugins._errors import Problem

HOOKS_FILE = "hooks/hooks.json"
MANIFEST = ".claude-plugin/plugin.json"
HookEvent = Literal["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"]
HOOK_EVENTS: tuple[HookEvent, ...] = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
)
#: Events whose matcher is a tool name; SessionStart's is its source (`startup`, `resume`…);
#: the others match everything.
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
MATCHED_EVENTS = (*TOOL_EVENTS, "SessionStart")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0


@dataclass(frozen=True)
class Hook:
    """One command hook: run `command` (with `sh -c`, in the sandbox) on `event` when
    `matcher` (a regular expression over Claude Code's tool name, or SessionStart's
    source; None: all) matches."""

    event: HookEvent
    command: str
    matcher: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    path: str = HOOKS_FILE

    def matches(self, subject: str) -> bool:
        if self.matcher is None or self.event not in MATCHED_EVENTS:
            return True
        return re.fullmatch(self.matcher, subject) is not None  # compiled when read


def read_hooks(
    root: Path, paths: set[str], manifest: Mapping[str, Any]
) -> tuple[tuple[Hook, ...], list[Problem]]:
    """Hooks from `hooks/hooks.json` and the manifest's `hooks` (a path, a list of paths,
    or the configuration itself)."""
    problems: list[Problem] = []
    configs: list[tuple[str, Any]] = []
    if HOOKS_FILE in paths:
        configs.append((HOOKS_FILE, _load(root, HOOKS_FILE, problems)))
    extra = manifest.get("hooks")
    sources = [extra] if isinstance(extra, str | dict) else extra if isinstance(extra, list) else []
    if extra is not None and not sources:
        problems.append(Problem("warning", "hooks must be a path or an object; ignored", MANIFEST))
    for source in sources:
        if isinstance(source, dict):
            configs.append((MANIFEST, source))
            continue
        if not isinstance(source, str):
            problems.append(Problem("warning", "hooks entries must be paths; ignored", MANIFEST))
            continue
        rel = str(PurePosixPath(source.removeprefix("./")))
        if rel == HOOKS_FILE:
            continue  # read above
        if rel not in paths:
            problems.append(
                Problem("warning", f"hooks file {source!r} is not in the plugin", MANIFEST)
            )
            continue
        configs.append((rel, _load(root, rel, problems)))
    hooks: list[Hook] = []
    for rel, config in configs:
        hooks += _hooks(config, rel, problems)
    return tuple(hooks), problems


def _load(root: Path, rel: str, problems: list[Problem]) -> Any:
    try:
        return json.loads((root / rel).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        problems.append(Problem("error", "not UTF-8 text", rel))
    except json.JSONDecodeError as exc:
        problems.append(Problem("error", f"malformed JSON: {exc.msg}", rel, exc.lineno))
    return None


def _hooks(config: Any, rel: str, problems: list[Problem]) -> list[Hook]:
    if config is None:
        return []
    events = config.get("hooks") if isinstance(config, dict) else None
    if not isinstance(events, dict):
        problems.append(Problem("error", 'expected {"hooks": {event: [...]}}', rel, 1))
        return []
    hooks: list[Hook] = []
    for event, groups in events.items():
        if event not in HOOK_EVENTS:
            problems.append(Problem("ignored", f"hook event {event!r} is not run by opennua", rel))
            continue
        if not isinstance(groups, list):
            problems.append(Problem("error", f"{event} must be a list of matcher groups", rel))
            continue
        for group in groups:
            hooks += _group(event, group, rel, problems)
    return hooks


def _group(event: HookEvent, group: Any, rel: str, problems: list[Problem]) -> list[Hook]:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        problems.append(Problem("error", f'{event}: each entry needs a "hooks" list', rel))
        return []
    matcher = group.get("matcher")
    if matcher in ("", "*"):
        matcher = None
    if matcher is not None and not isinstance(matcher, str):
        problems.append(Problem("error", f"{event}: matcher must be a string", rel))
        return []
    if matcher is not None:
        try:
            re.compile(matcher)
        except re.error as exc:
            problems.append(Problem("error", f"{event}: matcher {matcher!r}: {exc}", rel))
            return []
    hooks = []
    for entry in group["hooks"]:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind != "command":
            problems.append(
                Problem("ignored", f"{event}: a hook of type {kind!r} is not run by opennua", rel)
            )
            continue
        command, timeout = entry.get("command"), entry.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(command, str) or not command.strip():
            problems.append(Problem("error", f"{event}: a command hook needs a command", rel))
            continue
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            problems.append(Problem("error", f"{event}: timeout must be a positive number", rel))
            continue
        if timeout > MAX_TIMEOUT:
            problems.append(
                Problem("warning", f"{event}: timeout {timeout}s is cut to {MAX_TIMEOUT:g}s", rel)
            )
        hooks.append(
            Hook(
                event=event,
                command=command,
                matcher=matcher,
                timeout=min(float(timeout), MAX_TIMEOUT),
                path=rel,
            )
        )
    return hooks
