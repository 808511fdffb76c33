"""A plugin's command hooks, run in the sandbox with Claude Code's contract.

Each hook is `sh -c <command>` in the execution's sandbox (the confinement of `shell`
and of local MCP servers: no network, the workspace writable, the plugin directory
read-only at `/plugin`), with the event as JSON on stdin. Its answer (docs/plugins.md,
"Hooks"): exit 0 and optional JSON on stdout (`decision: "block"` + `reason`,
`hookSpecificOutput.permissionDecision`, `hookSpecificOutput.additionalContext`; plain
stdout adds context to a prompt), exit 2 blocks with stderr as the reason, any other exit
is a non-blocking error (logged; the work goes on). Matching hooks of one event run
concurrently, as in Claude Code.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opennua.plugins import Hook, HookEvent
from opennua.runtime._commands import Streams, run_command
from opennua.runtime._errors import RuntimeFailure
from opennua.runtime._mcp import PLUGIN_MOUNT
from opennua.runtime._sandbox import Sandbox, SandboxUnavailable, inside

log = logging.getLogger("opennua.runtime.hooks")
OUTPUT_CAP = 64 * 1024
#: opennua's tools under the names hooks written for Claude Code match (`Bash`, `Write`…).
CLAUDE_NAMES = {
    "shell": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "list_files": "LS",
    "plan": "TodoWrite",
    "task": "Task",
    "skill": "Skill",
}
#: Claude Code's argument names, added beside opennua's (hooks read `.tool_input.file_path`).
_CLAUDE_ARGS = {"path": "file_path", "old": "old_string", "new": "new_string"}
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def claude_tool_name(name: str) -> str:
    """`shell` → `Bash`; an MCP tool `notes__lookup` → `mcp__notes__lookup`."""
    if name in CLAUDE_NAMES:
        return CLAUDE_NAMES[name]
    return f"mcp__{name}" if "__" in name else name


def claude_tool_input(args: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for ours, theirs in _CLAUDE_ARGS.items():
        if ours in args and theirs not in args:
            out[theirs] = args[ours]
    return out


@dataclass(frozen=True)
class Verdict:
    """What the hooks of one event said. `block`: the reasons to block (the tool call,
    the prompt) or, for Stop, to go on; `ask`: a PreToolUse hook wants a person to
    approve; `context`: text for the model."""

    block: tuple[str, ...] = ()
    ask: bool = False
    context: tuple[str, ...] = ()

    @property
    def blocked(self) -> bool:
        return bool(self.block)

    @property
    def reason(self) -> str:
        return "\n".join(self.block) or "blocked by a hook"


@dataclass(frozen=True)
class HookSet:
    """A plugin's hooks and the directory they run from (not part of the digest: where a
    version is unpacked differs between machines)."""

    hooks: tuple[Hook, ...]
    plugin_root: Path = field(compare=False)

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"event": h.event, "matcher": h.matcher, "command": h.command, "timeout": h.timeout}
            for h in self.hooks
        ]

    def matching(
        self, event: HookEvent, tool: str | None = None, *, source: str = "startup"
    ) -> list[Hook]:
        """The hooks of `event` for `tool` (a tool event) or `source` (SessionStart)."""
        subject = claude_tool_name(tool) if tool is not None else source
        return [h for h in self.hooks if h.event == event and h.matches(subject)]

    async def run(
        self,
        event: HookEvent,
        payload: Mapping[str, Any],
        *,
        sandbox: Sandbox,
        workdir: Path,
        tool: str | None = None,
    ) -> Verdict:
        """Run the hooks of `event` (for a tool event, those matching `tool`)."""
        hooks = self.matching(event, tool)
        if not hooks:
            return Verdict()
        data = {
            **payload,
            "hook_event_name": event,
            "cwd": inside(sandbox, workdir),
            "transcript_path": "",
            "permission_mode": "default",
        }
        if tool is not None:
            data["tool_name"] = claude_tool_name(tool)
        stdin = json.dumps(data).encode()
        answers = await asyncio.gather(*(self._one(h, stdin, sandbox, workdir) for h in hooks))
        block = tuple(reason for a in answers for reason in a.block)
        context = tuple(text for a in answers for text in a.context)
        return Verdict(block=block, ask=any(a.ask for a in answers), context=context)

    async def _one(self, hook: Hook, stdin: bytes, sandbox: Sandbox, workdir: Path) -> Verdict:
        root = inside(sandbox, self.plugin_root, PLUGIN_MOUNT)
        env = {
            **_ENV,
            "HOME": str(workdir),
            "CLAUDE_PLUGIN_ROOT": root,
            "PLUGIN_ROOT": root,
            "CLAUDE_PROJECT_DIR": inside(sandbox, workdir),
        }
        try:
            async with asyncio.timeout(hook.timeout):
                result = await run_command(
                    sandbox,
                    ["/bin/sh", "-c", hook.command],
                    workdir=workdir,
                    env=env,
                    output_cap=OUTPUT_CAP,
                    read_only=[(self.plugin_root, PLUGIN_MOUNT)],
                    streams=Streams(stdin=stdin, stderr_apart=True),
                )
        except TimeoutError:
            log.warning("%s hook %r timed out after %gs", hook.event, hook.command, hook.timeout)
            return Verdict()
        except SandboxUnavailable as exc:
            raise RuntimeFailure(
                f"the plugin's {hook.event} hook runs in the sandbox, which cannot start: "
                f"{exc.reason}",
                code="sandbox_unavailable",
            ) from None
        out = result.output.decode(errors="replace").strip()
        err = result.errors.decode(errors="replace").strip()
        if result.exit_status == 2:
            return Verdict(block=(err or f"{hook.event} hook exited with status 2",))
        if result.exit_status != 0:
            log.warning(
                "%s hook %r failed (exit %d): %s", hook.event, hook.command, result.exit_status, err
            )
            return Verdict()
        return _answer(hook.event, out)


def _answer(event: HookEvent, out: str) -> Verdict:
    """Exit 0: the JSON on stdout, or plain text (context for prompt events)."""
    try:
        data = json.loads(out) if out.startswith("{") else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        prompt_event = event in ("UserPromptSubmit", "SessionStart")
        return Verdict(context=(out,) if out and prompt_event else ())
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    reason = data.get("reason") or data.get("stopReason") or ""
    block: tuple[str, ...] = ()
    ask = False
    decision = specific.get("permissionDecision") if event == "PreToolUse" else None
    if decision == "deny":
        block = (str(specific.get("permissionDecisionReason") or reason or "denied by a hook"),)
    elif decision == "ask":
        ask = True
    elif data.get("decision") == "block" or (data.get("continue") is False and event != "Stop"):
        block = (str(reason or f"blocked by a {event} hook"),)
    context = specific.get("additionalContext")
    return Verdict(
        block=block,
        ask=ask,
        context=(str(context),) if isinstance(context, str) and context else (),
    )
